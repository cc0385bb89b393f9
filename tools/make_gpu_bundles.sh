#!/usr/bin/env bash
# The sm_90a bundles tools/gpu_tests.sh checks on the GPU machine: the tiny
# Llama's 45 GEMM kernels under each policy of test/gpu/Inputs (between them
# every format, scale rule, rounding and rotation the sm_90a kernels
# support, in all three roles), compiled here into build/gpu-bundles/.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/gpu-bundles
rm -rf "$out" && mkdir -p "$out"
for policy in test/gpu/Inputs/gpu_variants_*.tetra; do
  build/bin/tetra compile --kernels --target=sm_90a models/runs/tiny_c4_cpu.tetra \
    "$policy" -o "$out/$(basename "$policy" .tetra).tbundle"
done
# BF16 with 4,096 tokens a step: Wgrads split across blocks, MN-major operands.
build/bin/tetra compile --kernels --target=sm_90a test/gpu/Inputs/gpu_long_k_run.tetra \
  -o "$out/gpu_long_k_bf16.tbundle"

