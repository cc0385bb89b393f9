#!/usr/bin/env bash
# The whole training step on the GPU machine (docs/benchmarks.md, "The whole
# step on the H200"), from step bundles compiled here:
#
#   build/step-bundles/tiny-POLICY.tbundle   tetra compile --target=sm_90a
#       models/runs/tiny_c4_h200.tetra models/policies/POLICY.tetra -o ...
#   build/step-bundles/125m-POLICY.tbundle   tetra compile --target=sm_90a
#       bench/train_125m_h200.tetra models/policies/POLICY.tetra -o ...
#   build/step-bundles/check125m-POLICY.tbundle   tetra compile --target=sm_90a
#       bench/check_125m_h200.tetra POLICY -o ...  (kernel checks at head_dim 64)
#   build/peers/peers_h200.py                the peers (../shared/bench)
#
# For every tiny bundle: --check-kernels (each library kernel against the
# CPU's) and 50 steps; a run stopped at step 25 and resumed must give the
# uninterrupted run's losses bit for bit; the 125M bundles' tokens/s beside
# PyTorch's at the same shape. Everything lands in one archive,
# $OUT/gpu_step.tgz (logs, metrics, the tiny runs' checkpoints: the device
# tool returns at most a few files); a table last, with the seconds each part
# took. CHECK=0 skips the kernel checks; STEPS_125M sets the 125M runs' steps
# (default 4), each with the GPU's memory in use at its peak (nvidia-smi);
# PROFILE=1 adds each 125M bundle's per-kernel profile
# (tetra-run --profile), NCU=1 the GPU's own kernel times of one step by
# family (Nsight Compute, bench/step_kernel_times.py) for every 125M bundle
# (NCU=TEXT: only those whose name holds TEXT, e.g. NCU=none_: a shorter
# call); COMPARE=REGEX adds a side-by-side table of the kernels matching
# REGEX in one step of every 125M bundle (tools/gpu_kernel_compare.sh: a
# branch's bundle beside main's), and a bundle 125m-main-NAME beside
# 125m-NAME or 125m-BRANCH-NAME has their losses compared bit for bit; each
# command has a time limit, and the summary so far is written to
# $OUT/gpu_step/summary.txt after each part (what a call cut short still
# brings back).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp}/gpu_step"
mkdir -p "$out/resume"
started=$(date +%s)
elapsed() { echo "[$(( $(date +%s) - started )) s]"; }
run=build/bin/tetra-run
data=(--data data/c4/c4-train.sample.json.gz
      --eval-data data/c4/c4-validation.sample.json.gz)
summary=()
# The summary so far, where a call cut short still finds it.
saveSummary() { printf '%s\n' "${summary[@]}" > "$out/summary.txt"; }
for bundle in build/step-bundles/tiny-*.tbundle; do
  [[ -d $bundle ]] || continue
  policy=$(basename "$bundle" .tbundle); policy=${policy#tiny-}
  check=skipped
  if [[ ${CHECK:-1} != 0 ]]; then
    timeout 120 $run "$bundle" "${data[@]}" --check-kernels \
      > "$out/check-$policy.txt" 2>&1
    check=$?
  fi
  timeout 120 $run "$bundle" "${data[@]}" --steps 50 --out "$out/gpu/$policy" \
    --label "gpu/$policy" --quiet > "$out/run-$policy.txt" 2>&1
  trained=$?
  summary+=("$(printf '%-26s check %s  run %s  %s' "$policy" \
    "$([[ $check == 0 ]] && echo pass || echo "$check")" \
    "$([[ $trained == 0 ]] && echo ok || echo FAIL)" \
    "$(tail -1 "$out/run-$policy.txt" | sed 's/; metrics.*//')")")
done

# The 125M model's head_dim (64) at a small shape (bench/check_125m_h200.tetra):
# build/step-bundles/check125m-POLICY.tbundle, kernels checked only.
for bundle in build/step-bundles/check125m-*.tbundle; do
  [[ -d $bundle ]] || continue
  policy=$(basename "$bundle" .tbundle); policy=${policy#check125m-}
  timeout 180 $run "$bundle" --data data/c4/c4-train.sample.json.gz \
    --tokenizer gpt2:data/tokenizers/gpt2 --check-kernels > "$out/check125m-$policy.txt" 2>&1
  summary+=("check125m $policy: rc $? $(tail -1 "$out/check125m-$policy.txt")")
done

summary+=("$(elapsed) tiny runs done")
saveSummary
# Resume: 25 steps, then 25 more from the checkpoint, against 50 straight.
for policy in fp4_all_hadamard fp4_all_sr; do
  bundle=build/step-bundles/tiny-$policy.tbundle
  [[ -d $bundle ]] || continue
  dir="$out/resume/$policy"
  timeout 120 $run "$bundle" "${data[@]}" --steps 50 --until 25 --checkpoint-every 25 \
    --out "$dir" --label "gpu/$policy" --quiet > "$dir.log" 2>&1
  timeout 120 $run "$bundle" "${data[@]}" --steps 50 --resume "$dir/checkpoints" \
    --out "$dir" --label "gpu/$policy" --quiet >> "$dir.log" 2>&1
  if python3 - "$out/gpu/$policy/metrics.jsonl" "$dir/metrics.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
la = {r["step"]: r["loss"] for r in a if "loss" in r}
lb = {r["step"]: r["loss"] for r in b if "loss" in r}
sys.exit(0 if la and la == lb else 1)
PY
  then summary+=("resume $policy: losses of steps 1-50 equal to the uninterrupted run's")
  else summary+=("resume $policy: DIFFERENT from the uninterrupted run")
  fi
done

# Checkpoints are the same files on every target: a CPU run's step-25
# checkpoint (build/cpu-ckpt/POLICY, from tetra train --until 25) continues
# here; docs/benchmarks.md compares it with the CPU's own continuation.
for dir in build/cpu-ckpt/*/; do
  policy=$(basename "$dir")
  bundle=build/step-bundles/tiny-$policy.tbundle
  [[ -d $bundle && -d $dir/checkpoints ]] || continue
  timeout 120 $run "$bundle" "${data[@]}" --steps 50 --resume "$dir/checkpoints" \
    --out "$out/from-cpu/$policy" --label "cpu-then-gpu/$policy" --quiet \
    > "$out/from-cpu-$policy.txt" 2>&1
  summary+=("from-cpu $policy: rc $? $(tail -1 "$out/from-cpu-$policy.txt" | sed 's/; metrics.*//')")
done

# Speed at the 125M shape, beside PyTorch's.
for bundle in build/step-bundles/125m-*.tbundle; do
  policy=$(basename "$bundle" .tbundle); policy=${policy#125m-}
  summary+=("$(elapsed) 125m $policy starts")
  # The GPU's memory in use, sampled every 200 ms (the CUDA context
  # included): its peak over the run.
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 \
    > "$out/memory-$policy.txt" 2>/dev/null &
  sampler=$!
  timeout "${LIMIT_125M:-240}" $run "$bundle" --data data/c4/c4-train.sample.json.gz \
    --tokenizer gpt2:data/tokenizers/gpt2 --steps "${STEPS_125M:-4}" \
    --out "$out/speed/$policy" \
    --label "125m/$policy" --quiet > "$out/speed-$policy.txt" 2>&1
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
  summary+=("125m $policy: $(tail -1 "$out/speed-$policy.txt" | sed 's/; metrics.*//'); GPU memory peak $(sort -n "$out/memory-$policy.txt" | tail -1) MiB")
  if [[ ${PROFILE:-0} != 0 ]]; then
    timeout 120 $run "$bundle" --data data/c4/c4-train.sample.json.gz \
      --tokenizer gpt2:data/tokenizers/gpt2 --profile > "$out/profile-$policy.txt" 2>&1
    summary+=("125m $policy profile: $(tail -1 "$out/profile-$policy.txt")")
  fi
  if [[ ${NCU:-0} == 1 || ( ${NCU:-0} != 0 && $policy == *"$NCU"* ) ]]; then
    # The GPU's own kernel durations, filed by family (bench/step_kernel_times.py).
    timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
      $run "$bundle" --data data/c4/c4-train.sample.json.gz \
      --tokenizer gpt2:data/tokenizers/gpt2 --profile > "$out/ncu-$policy.csv" 2>&1
    python3 bench/step_kernel_times.py "$bundle" "$out/ncu-$policy.csv" \
      > "$out/ncu-$policy.txt" 2>&1
    summary+=("125m $policy kernels: $(tail -1 "$out/ncu-$policy.txt")")
    gzip -f "$out/ncu-$policy.csv"
  fi
  rm -rf "$out/speed/$policy/checkpoints" # 1.5 GB a run: not worth carrying back
  saveSummary
done
# Branches' bundles beside main's (125m-main-NAME beside 125m-NAME or
# 125m-BRANCH-NAME, tools/make_branch_bundles.sh): whether each one's 125M
# losses are main's, bit for bit (a kernel change that keeps every result's
# bits keeps them).
for main in build/step-bundles/125m-main-*.tbundle; do
  [[ -d $main ]] || continue
  name=$(basename "$main" .tbundle); name=${name#125m-main-}
  for bundle in build/step-bundles/125m-*"$name".tbundle; do
    other=$(basename "$bundle" .tbundle); other=${other#125m-}
    [[ $bundle == "$main" ]] && continue
    if python3 - "$out/speed/main-$name/metrics.jsonl" "$out/speed/$other/metrics.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
la = [(r["step"], r["loss"]) for r in a if "loss" in r]
lb = [(r["step"], r["loss"]) for r in b if "loss" in r]
sys.exit(0 if la and la == lb else 1)
PY
    then summary+=("125m $other: losses bit-identical to main's")
    else summary+=("125m $other: losses DIFFERENT from main's (or a run missing)")
    fi
  done
done
if [[ -n ${COMPARE:-} ]]; then
  summary+=("$(elapsed) kernel comparison starts")
  OUT="$out" timeout 300 tools/gpu_kernel_compare.sh "$COMPARE" \
    build/step-bundles/125m-*.tbundle > "$out/compare.txt" 2>&1
  summary+=("kernels matching '$COMPARE' side by side (µs): $out/compare.txt")
  saveSummary
fi
if [[ -f build/peers/peers_h200.py ]]; then
  summary+=("$(elapsed) peers start")
  PYTHONUNBUFFERED=1 timeout "${LIMIT_PEERS:-240}" python3 build/peers/peers_h200.py --only train \
    --no-default-train \
    --train-config tetra-125m=50304,640,12,10,10,1792,16,2048 \
    > "$out/peers.txt" 2>&1
  summary+=("peers: $(grep 'tetra-125m' "$out/peers.txt" | tail -1)")
fi
summary+=("$(elapsed) done")
saveSummary
tar czf "${OUT:-/tmp}/gpu_step.tgz" -C "$(dirname "$out")" gpu_step
[[ -f $out/compare.txt ]] && cat "$out/compare.txt"
printf '%s\n' "${summary[@]}"
