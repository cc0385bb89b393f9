#!/usr/bin/env python3
"""Where a step's GPU time goes, from Nsight Compute's own kernel durations.

`tetra-run --profile` times each launch on the host with a synchronize after
it, which adds the host's round trip (several µs) to every launch and
overstates the small ones. This reads the durations the GPU measured instead:

  ncu --clock-control none --metrics gpu__time_duration.sum --csv \\
      tetra-run BUNDLE --data ... --profile > ncu.csv
  python3 bench/step_kernel_times.py BUNDLE ncu.csv

The last launches of the capture (as many as the bundle's schedule has: the
profiled step; the warm-up step comes before it) must be the schedule's, in
its order; each is filed under the family `tetra-run --profile` uses, with
the bytes its buffers hold (each buffer once; a run of launches of one
family over the same buffers once) and the rate that gives.
"""
import csv
import io
import json
import math
import os
import re
import sys


def family(kernel):
    if "__gemm" in kernel:
        for role in ("fprop", "dgrad", "wgrad"):
            if role in kernel:
                return "gemm " + role
        return "gemm"
    if "__sum" in kernel:
        return "gemm split sums"
    # Before the prologues: an elementwise kernel's variants (NAME__bf16,
    # NAME__and_bf16) are elementwise launches too.
    if kernel.startswith("elementwise_"):
        return "elementwise"
    if "__" in kernel:
        return "gemm prologue"
    return re.sub(r"[_0-9]+$", "", kernel)


def main(bundle, capture):
    schedule = json.load(open(os.path.join(bundle, "schedule.json")))
    launches, buffers = schedule["launches"], schedule["buffers"]
    text = open(capture).read()
    start = text.find('"ID"')
    if start < 0:
        sys.exit(f"{capture}: no ncu CSV table in it")
    rows = [r for r in csv.DictReader(io.StringIO(text[start:]))
            if r.get("Metric Name") == "gpu__time_duration.sum"]
    if len(rows) < len(launches):
        sys.exit(f"{capture}: {len(rows)} kernels captured, the step has "
                 f"{len(launches)}")
    rows = rows[-len(launches):]
    table = {}
    total = 0.0
    previous = None
    for launch, row in zip(launches, rows):
        name = row["Kernel Name"].split("(")[0].strip()
        if name != launch["kernel"]:
            sys.exit(f"{capture}: kernel '{name}' where the schedule has "
                     f"'{launch['kernel']}': not this bundle's step")
        unit = row["Metric Unit"]
        scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3,
                 "ms": 1.0, "msecond": 1.0}[unit]
        ms = float(row["Metric Value"].replace(",", "")) * scale
        # A run of launches of one family over the same buffers (the
        # cross-entropy gradient's row ranges) moves those bytes once.
        name = family(launch["kernel"])
        same = previous == (name, launch["buffers"])
        previous = (name, launch["buffers"])
        size = 0 if same else sum(math.prod(buffers[b]["shape"]) * 4
                                  for b in launch["buffers"])
        entry = table.setdefault(name, [0, 0.0, 0])
        entry[0] += 1
        entry[1] += ms
        entry[2] += size
        total += ms
    width = max(len("kernel family"), *map(len, table))
    print(f"{'kernel family':{width}s} {'launches':>8s} {'ms':>9s} "
          f"{'share':>6s} {'GB':>8s} {'TB/s':>6s}")
    for name, (count, ms, size) in sorted(table.items(), key=lambda x: -x[1][1]):
        print(f"{name:{width}s} {count:8d} {ms:9.3f} {100 * ms / total:5.1f}% "
              f"{size / 1e9:8.2f} {size / 1e9 / ms:6.2f}")
    print(f"{bundle}: one step, {len(launches)} launches, {total:.3f} ms of "
          f"kernel time (Nsight Compute's durations, no gaps)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
