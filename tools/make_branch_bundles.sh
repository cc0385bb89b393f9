#!/usr/bin/env bash
# Branches' step bundles beside the current commit's, for one device call
# that checks and times them against it (tools/gpu_step.sh):
#
#   tools/make_branch_bundles.sh BRANCH...
#
# compiles here, into build/step-bundles/ (sm_90a, compile cache off):
#   125m-main-none_bf16_attention_bf16   the current commit's 125M `none` step
# then checks each BRANCH out, builds it, and compiles the branch's
#   125m-none_bf16_attention_bf16        the same step
#   check125m-none_bf16_attention_bf16   its kernel checks at head_dim 64
#   tiny-bf16, tiny-fp4_all_hadamard     the tiny Llama (checks, 50 steps,
#                                        the fp4 resume)
# (with several branches, each branch's names carry the branch after their
# first part, slashes as dashes: 125m-wip-pingpong-none_..., tiny-wip-
# pingpong-bf16, ...; gpu_step.sh's fp4 resume check then finds no
# tiny-fp4_all_hadamard), and goes back to the current commit and builds
# it again. The bundles are
# packed as build/step-bundles.tar.xz (carried with build/bin/tetra-run and
# build/peers); on the GPU machine:
#
#   tar xJf build/step-bundles.tar.xz -C build &&
#     STEPS_125M=12 COMPARE='__gemm' OUT=$OUT tools/gpu_step.sh
#
# gpu_step.sh then also says whether each branch's 125M losses are main's
# bit for bit. BENCH_POLICIES (default bf16_attention_bf16) names the
# policies of the 125M bundles, main's and each branch's
# (BENCH_POLICIES="bf16_attention_bf16 fp4_all_hadamard_attention_bf16");
# TINY=0 leaves out each branch's check125m and tiny bundles (a shorter
# call). MAIN_VARIANTS="TAG:KEY=VALUE..." adds the current commit's 125M
# step under other settings, as 125m-TAG-none_POLICY, which gpu_step.sh
# times and compares with main's bit for bit like a branch's (e.g.
# MAIN_VARIANTS="products:recompute=products stats:sqnr_interval=4": the
# same training recomputing the layers' products, and with its SQNR and
# folding statistics in metrics.jsonl). Refuses a working tree with
# uncommitted changes (the checkouts would carry them).
set -euo pipefail
cd "$(dirname "$0")/.."
(( $# > 0 )) || { echo "usage: tools/make_branch_bundles.sh BRANCH..." >&2; exit 1; }
for branch in "$@"; do
  git rev-parse --verify --quiet "$branch^{commit}" > /dev/null ||
    { echo "make_branch_bundles: no branch or commit '$branch'" >&2; exit 1; }
done
if ! git diff --quiet || ! git diff --cached --quiet; then
  echo "make_branch_bundles: the working tree has uncommitted changes; commit or stash them" >&2
  exit 1
fi
here=$(git symbolic-ref --quiet --short HEAD || git rev-parse HEAD)
out=build/step-bundles
rm -rf "$out" && mkdir -p "$out"
compile() {
  TETRA_CACHE_DIR=off build/bin/tetra compile --target=sm_90a "$@" | tail -1
}
# The 125M step under each of BENCH_POLICIES (bench/policies/NAME.tetra).
read -r -a policies <<< "${BENCH_POLICIES:-bf16_attention_bf16}"
bench() { # TAG: the 125M step under each policy, tagged
  for policy in "${policies[@]}"; do
    compile bench/train_125m_h200.tetra "bench/policies/$policy.tetra" \
      --set recompute=none -o "$out/125m-${1}none_$policy.tbundle"
  done
}
cmake --build build > /dev/null
bench main-
for variant in ${MAIN_VARIANTS:-}; do # TAG:KEY=VALUE
  for policy in "${policies[@]}"; do
    compile bench/train_125m_h200.tetra "bench/policies/$policy.tetra" \
      --set recompute=none --set "${variant#*:}" \
      -o "$out/125m-${variant%%:*}-none_$policy.tbundle"
  done
done
# Back to where we were, whatever happens to the branch's build.
trap 'git checkout --quiet "$here" && cmake --build build > /dev/null' EXIT
for branch in "$@"; do
  tag=""
  (( $# > 1 )) && tag="${branch//\//-}-"
  git checkout --quiet "$branch"
  cmake --build build > /dev/null
  bench "$tag"
  [[ ${TINY:-1} == 0 ]] && continue
  compile bench/check_125m_h200.tetra bench/policies/bf16_attention_bf16.tetra \
    --set recompute=none -o "$out/check125m-${tag}none_bf16_attention_bf16.tbundle"
  for policy in bf16 fp4_all_hadamard; do
    compile models/runs/tiny_c4_h200.tetra "models/policies/$policy.tetra" \
      -o "$out/tiny-$tag$policy.tbundle"
  done
done
tar cJf build/step-bundles.tar.xz -C build step-bundles
du -sh build/step-bundles.tar.xz
