#!/usr/bin/env bash
# Side by side: the GPU's own durations of the kernels matching REGEX in
# one step of each bundle (Nsight Compute's gpu__time_duration.sum, clocks
# as they are), on the GPU machine — for comparing builds of one step in
# one call:
#
#   tools/gpu_kernel_compare.sh 'REGEX' BUNDLE...
#
# e.g. tools/gpu_kernel_compare.sh '__gemm' build/a.tbundle build/b.tbundle.
# Each kernel name's fastest launch and its mean over the step's launches
# (a name is shared by the layers' launches of one shape), in µs; the
# captures land in $OUT/compare/NAME.csv (the runs' own outputs are removed).
set -uo pipefail
cd "$(dirname "$0")/.."
regex=$1; shift
out="${OUT:-/tmp}/compare"
mkdir -p "$out"
for bundle in "$@"; do
  name=$(basename "$bundle" .tbundle)
  timeout 240 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
    -k "regex:$regex" build/bin/tetra-run "$bundle" \
    --data data/c4/c4-train.sample.json.gz --tokenizer gpt2:data/tokenizers/gpt2 \
    --steps 1 --out "$out/run-$name" > "$out/$name.csv" 2>&1
  echo "$name: ncu rc $?"
  rm -rf "$out/run-$name" # its checkpoint (1.5 GB for the 125M model)
done
python3 - "$out" "$@" <<'PY'
import csv, io, os, sys
out, bundles = sys.argv[1], sys.argv[2:]
names = [os.path.basename(b).removesuffix(".tbundle") for b in bundles]
times = {}
for name in names:
    text = open(os.path.join(out, name + ".csv")).read()
    start = text.find('"ID"')
    rows = csv.DictReader(io.StringIO(text[start:])) if start >= 0 else []
    kernels = times.setdefault(name, {})
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0,
                 "ms": 1e3, "msecond": 1e3}[r["Metric Unit"]]
        kernels.setdefault(r["Kernel Name"].split("(")[0].strip(), []).append(
            float(r["Metric Value"].replace(",", "")) * scale)
every = sorted({k for kernels in times.values() for k in kernels})
width = max([len("kernel (µs: fastest / mean)")] + [len(k) for k in every])
# Columns by number (bundle names share long suffixes), named first.
for i, n in enumerate(names, 1):
    print(f"[{i}] {n}")
print(f"{'kernel (µs: fastest / mean)':{width}s}" +
      "".join(f" {f'[{i}]':>19s}" for i in range(1, len(names) + 1)))
for k in every:
    cells = []
    for n in names:
        t = times[n].get(k)
        cells.append(f"{min(t):9.1f} /{sum(t) / len(t):8.1f}" if t else f"{'-':>19s}")
    print(f"{k:{width}s}" + "".join(f" {c:>19s}" for c in cells))
PY
