#!/usr/bin/env python3
"""A static speed estimate for a gfx950 bundle's GEMM launches (MI355X).

There is no MI355X here, so this is an *estimate*, never a measurement:

  tools/gfx950_estimate.py BUNDLE [--llvm-mca PATH]

For every kernel of a `tetra compile --target=gfx950` bundle it takes the GEMM
launch's K loops (one staged step of `step_k` per iteration: the chunked pass,
and for MXFP4 x MXFP4 the exact pass too) from the kernel's assembly and feeds
each to llvm-mca's gfx950 model (`-mcpu=gfx950`). A step of
one wave costs, in cycles of its SIMD, the largest of
  - issue:  the loop's instructions (a SIMD issues about one a cycle for its
            waves), from llvm-mca's block throughput;
  - MFMA:   the step's MFMAs at AMD's published MI355X rate (dense MXFP4 /
            MXFP6 10 PFLOP/s, MXFP8 5, BF16 2.5 over 256 CUs x 4 SIMDs at
            2.4 GHz: 16x16x128 FP4 = 16 cycles, 32x32x64 FP4 = 32; FP8 twice,
            BF16 32x32x16 = 16), which llvm-mca's model underrates (it gives
            the 16x16x128 a throughput of 4 cycles);
  - latency: llvm-mca's cycles for one wave alone, divided by the waves a
            SIMD holds (the resource report's waves_per_simd).
Memory (global loads, LDS bank conflicts, barriers) is modelled only as far
as llvm-mca's latencies go, so the figure is an upper bound: "mfma" as the
bound means the estimate is the published peak. TFLOP/s = 2 * 32 * 32 * step_k / cycles * 4 SIMDs *
256 CUs * 2.4 GHz, beside the published peak for the operands' format.
"""

import json
import os
import re
import subprocess
import sys

CUS, SIMDS, CLOCK = 256, 4, 2.4e9
# Published dense peaks (TFLOP/s) by the MFMA's slowest operand format.
PEAK = {"e2m1": 10066.0, "e4m3": 5033.0, "e5m2": 5033.0, "bf16": 2516.0}
# Cycles per MFMA at those peaks: MACs / (peak MAC per SIMD per cycle).
def mfma_cycles(instruction, element):
    macs = {"16x16x128": 16 * 16 * 128, "32x32x64": 32 * 32 * 64,
            "32x32x16": 32 * 32 * 16}
    shape = next(s for s in macs if s in instruction)
    per_cycle = PEAK[element] * 1e12 / (2 * CUS * SIMDS * CLOCK)
    return macs[shape] / per_cycle


def loops_of(assembly, function):
    """The K loops of `function`: a block that a later branch jumps back
    to, from its label to that branch, with MFMAs in it — the chunked
    pass's and, for MXFP4 x MXFP4, the exact pass's (its MFMA sums go to
    integers: v_cvt_i32_f32). A list of (pass, instructions)."""
    body = assembly.split("\n" + function + ":", 1)[1].split(".Lfunc_end", 1)[0]
    lines = body.splitlines()
    at = {}
    found = []
    for i, line in enumerate(lines):
        label = re.match(r"^(\.LBB\d+_\d+):", line)
        if label:
            at[label.group(1)] = i
        branch = re.search(r"\bs_c?branch\w*\s+(\.LBB\d+_\d+)", line)
        if branch and branch.group(1) in at:
            loop = [l for l in lines[at[branch.group(1)]:i + 1]
                    if l.strip() and not l.startswith(".")
                    and not l.strip().startswith(";")]
            if any("v_mfma" in l for l in loop):
                exact = any("v_cvt_i32_f32" in l for l in loop)
                found.append(("exact" if exact else "chunked", loop))
    # Branches that jump back from further on enclose the K loop (the
    # launch's structure around it): each pass's innermost.
    innermost = {}
    for name, loop in found:
        if name not in innermost or len(loop) < len(innermost[name]):
            innermost[name] = loop
    return [(name, innermost[name]) for name in ("chunked", "exact")
            if name in innermost]


ITERATIONS = 10  # llvm-22's mca can take minutes on some loops at 100
MCA_SECONDS = 20  # and never end on a few: those kernels are left out


def mca(llvm_mca, instructions, name):
    try:
        result = subprocess.run(
            [llvm_mca, "-mtriple=amdgcn-amd-amdhsa", "-mcpu=gfx950",
             f"-iterations={ITERATIONS}"],
            input="\n".join(instructions) + "\n", capture_output=True,
            text=True, timeout=MCA_SECONDS)
    except FileNotFoundError:
        sys.exit(f"gfx950_estimate: no llvm-mca at {llvm_mca} (--llvm-mca PATH)")
    except subprocess.TimeoutExpired:
        return None
    if result.returncode != 0:
        sys.exit(f"gfx950_estimate: {name}: llvm-mca failed: " +
                 result.stderr.strip())
    total = int(re.search(r"Total Cycles:\s+(\d+)", result.stdout).group(1))
    block = float(re.search(r"Block RThroughput:\s+([\d.]+)", result.stdout).group(1))
    return total / ITERATIONS, block


def main(argv):
    args = argv[1:]
    llvm_mca = "/usr/lib/llvm-22/bin/llvm-mca"
    if "--llvm-mca" in args:
        i = args.index("--llvm-mca")
        llvm_mca = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1:
        sys.exit("usage: tools/gfx950_estimate.py BUNDLE [--llvm-mca PATH]")
    bundle = args[0]
    try:
        with open(os.path.join(bundle, "manifest.json")) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as error:
        sys.exit(f"gfx950_estimate: {bundle}: not a bundle ({error})")
    if manifest.get("target") != "gfx950":
        sys.exit(f"gfx950_estimate: {bundle} is a {manifest.get('target')} bundle, "
                 "not gfx950")
    print("ESTIMATE (llvm-mca's gfx950 model and AMD's published MI355X rates; "
          "no MI355X was run)")
    header = (f"{'kernel':<28} {'M x N x K':<22} {'pass':<7} {'instr':>5} "
              f"{'mfma':>4} {'mca 1 wave':>10} {'waves':>5} {'cycles':>7} "
              f"{'bound':<7} {'TFLOP/s':>8} {'of peak':>7}")
    print(header)
    for kernel in manifest["kernels"]:
        computes = kernel["computes"]
        plan = computes["plan"]
        gemm = next(r for r in kernel["resources"]
                    if r["function"].endswith("__gemm"))
        with open(os.path.join(bundle, kernel["name"] + ".s")) as f:
            assembly = f.read()
        loops = loops_of(assembly, gemm["function"])
        if not loops:
            sys.exit(f"gfx950_estimate: {kernel['name']}: no K loop with MFMAs "
                     "in its GEMM launch")
        shape = f"{computes['m']} x {computes['n']} x {computes['k']}"
        for name, loop in loops:
            mfmas = sum(1 for l in loop if "v_mfma" in l)
            row = (f"{kernel['name'][:28]:<28} {shape:<22} {name:<7} "
                   f"{len(loop):>5} {mfmas:>4} ")
            timed = mca(llvm_mca, loop, kernel["name"])
            if timed is None:
                print(row + f"(no estimate: llvm-mca gave no result in "
                      f"{MCA_SECONDS} s)")
                continue
            single, issue = timed
            formats = [computes[s]["format"] for s in ("lhs", "rhs")]
            element = "bf16" if "bf16" in formats else (
                "e4m3" if any(f != "e2m1" for f in formats) else "e2m1")
            mfma = mfmas * mfma_cycles(plan["instruction"], element)
            waves = max(1, gemm["waves_per_simd"])
            bounds = {"issue": issue, "mfma": mfma, "latency": single / waves}
            bound = max(bounds, key=bounds.get)
            cycles = bounds[bound]
            flops = 2 * 32 * 32 * plan["step_k"] / cycles * SIMDS * CUS * CLOCK
            print(row + f"{single:>10.1f} {waves:>5} {cycles:>7.1f} {bound:<7} "
                  f"{flops / 1e12:>8.1f} {100 * flops / 1e12 / PEAK[element]:>6.1f}%")


if __name__ == "__main__":
    main(sys.argv)
