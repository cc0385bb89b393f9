#!/usr/bin/env bash
# The step bundles tools/gpu_step.sh runs on the GPU machine, compiled here
# into build/step-bundles/ (sm_90a): the tiny Llama under POLICIES (default
# bf16 fp4_all_hadamard; names in models/policies/), the 125M model's
# head_dim at a small shape for the kernel checks, and the 125M benchmark
# shape (bench/train_125m_h200.tetra) under BENCH_POLICIES (default
# bf16_attention_bf16 fp4_all_hadamard_attention_bf16; bench/policies/),
# and again under each of RECOMPUTE's recompute modes (default `layers
# none`) for RECOMPUTE_POLICIES (default bf16_attention_bf16):
# 125m-MODE_POLICY (layers: the memory goal's bundle; none: the fastest),
# with its kernel-check bundle check125m-MODE_POLICY.
# PACK=1 also packs them into build/step-bundles.tar.xz (PTX compresses
# about 12 times): a device call carries at most 64 MiB, so carry that and
# begin the call with `tar xJf build/step-bundles.tar.xz -C build`.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/step-bundles
rm -rf "$out" && mkdir -p "$out"
compile() { build/bin/tetra compile --target=sm_90a "$@" > /dev/null; }
for policy in ${POLICIES:-bf16 fp4_all_hadamard}; do
  compile models/runs/tiny_c4_h200.tetra "models/policies/$policy.tetra" \
    -o "$out/tiny-$policy.tbundle"
done
for policy in ${BENCH_POLICIES:-bf16_attention_bf16 fp4_all_hadamard_attention_bf16}; do
  compile bench/check_125m_h200.tetra "bench/policies/$policy.tetra" \
    -o "$out/check125m-$policy.tbundle"
  compile bench/train_125m_h200.tetra "bench/policies/$policy.tetra" \
    -o "$out/125m-$policy.tbundle"
done
for mode in ${RECOMPUTE:-layers none}; do
  for policy in ${RECOMPUTE_POLICIES:-bf16_attention_bf16}; do
    compile bench/train_125m_h200.tetra "bench/policies/$policy.tetra" \
      --set recompute=$mode -o "$out/125m-${mode}_$policy.tbundle"
    compile bench/check_125m_h200.tetra "bench/policies/$policy.tetra" \
      --set recompute=$mode -o "$out/check125m-${mode}_$policy.tbundle"
  done
done
du -sh "$out"/*
if [[ ${PACK:-0} == 1 ]]; then
  tar cJf build/step-bundles.tar.xz -C build step-bundles
  du -sh build/step-bundles.tar.xz
fi
