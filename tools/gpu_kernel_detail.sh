#!/usr/bin/env bash
# Nsight Compute's full report (every section: throughput, pipes, stalls,
# memory) of one launch of each named kernel of a step bundle, on the GPU
# machine:
#
#   tools/gpu_kernel_detail.sh BUNDLE KERNEL...
#
# KERNEL is a kernel's exact name in the bundle's schedule.json (e.g.
# attention_forward_tiles_0); its first launch of the step is profiled.
# Writes $OUT/detail/KERNEL.txt (ncu --page details) and prints each
# kernel's duration, SM and memory throughput, and its top stall reasons.
set -uo pipefail
cd "$(dirname "$0")/.."
bundle=$1; shift
out="${OUT:-/tmp}/detail"
mkdir -p "$out"
for kernel in "$@"; do
  timeout 240 ncu --set full -k "regex:^${kernel}\$" -c 1 \
    --metrics "regex:(smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio|sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active)" \
    build/bin/tetra-run "$bundle" --data data/c4/c4-train.sample.json.gz \
    --tokenizer gpt2:data/tokenizers/gpt2 --profile > "$out/$kernel.txt" 2>&1
  echo "== $kernel (rc $?)"
  grep -E "^ +(Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per Thread|Achieved Occupancy|Issue Slots Busy|Executed Ipc Active)" \
    "$out/$kernel.txt" | head -12
  # The three largest stall reasons and the busiest pipes.
  grep -E "smsp__average_warps_issue_stalled_" "$out/$kernel.txt" |
    sort -k3 -g -r | head -4
  grep -E "sm__inst_executed_pipe_" "$out/$kernel.txt" | sort -k3 -g -r | head -5
done
