#!/usr/bin/env bash
# The study's grid: a run under each policy, with several seeds, then each
# policy's token overhead against the first (tetra compare) and the curves
# (tetra plot). docs/study.md says how the H200 runs are planned.
#
#   tools/study.sh RUN.tetra POLICY...          # here: tetra train --target cpu
#   tools/study.sh --bundles DIR POLICY...      # the GPU machine: tetra-run DIR/POLICY.tbundle
#
# POLICY is a name in models/policies/ (bf16, fp4_fprop, ...) or a path to a
# policy file; the first is the baseline. Environment: TETRA_BIN (where
# tetra and tetra-run are, default build/bin), SEEDS (default
# "1 2 3"), STEPS (default the run's), OUT (default out/study; a policy's
# seeds go to OUT/POLICY/seed=S, named POLICY/seed=S), LIMIT (seconds a run,
# default 600), and, with --bundles, RUN_ARGS (tetra-run's --data,
# --eval-data, --tokenizer, ...). Each run's checkpoints are removed after
# it (KEEP_CHECKPOINTS=1 keeps them); a run that fails is reported and the
# others go on; the exit status says whether all ran.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${TETRA_BIN:-build/bin}
bundles=
if [[ ${1:-} == --bundles ]]; then
  bundles=$2
  shift 2
else
  run=${1:?usage: tools/study.sh RUN.tetra POLICY... | --bundles DIR POLICY...}
  shift
fi
(( $# > 0 )) || { echo "tools/study.sh: no policies given" >&2; exit 2; }
out=${OUT:-out/study}
failed=0
for policy in "$@"; do
  name=$(basename "$policy" .tetra)
  file=$policy
  [[ -f $file ]] || file=models/policies/$name.tetra
  for seed in ${SEEDS:-1 2 3}; do
    dir=$out/$name/seed=$seed
    if [[ -e $dir/metrics.jsonl ]]; then
      echo "$name seed $seed: $dir holds a run already (kept; remove it to run again)"
      continue
    fi
    mkdir -p "$dir"
    if [[ -n $bundles ]]; then
      # shellcheck disable=SC2086
      timeout "${LIMIT:-600}" "$bin/tetra-run" "$bundles/$name.tbundle" \
        ${RUN_ARGS:-} ${STEPS:+--steps $STEPS} --seed "$seed" --out "$dir" \
        --label "$name/seed=$seed" --quiet > "$dir/log.txt" 2>&1
    else
      # shellcheck disable=SC2086
      timeout "${LIMIT:-600}" "$bin/tetra" train "$run" --target cpu \
        ${TRAIN_ARGS:-} --policy "$file" ${STEPS:+--steps $STEPS} --set seed="$seed" \
        --out "$dir" --label "$name/seed=$seed" --quiet > "$dir/log.txt" 2>&1
    fi
    status=$?
    [[ ${KEEP_CHECKPOINTS:-0} == 1 ]] || rm -rf "$dir/checkpoints"
    if (( status != 0 )); then
      failed=1
      echo "$name seed $seed: FAILED (exit $status): $(tail -1 "$dir/log.txt")"
    else
      echo "$name seed $seed: $(tail -1 "$dir/log.txt" | sed 's/; metrics.*//')"
    fi
  done
done
if [[ -x $bin/tetra ]]; then
  dirs=()
  for policy in "$@"; do dirs+=("$out/$(basename "$policy" .tetra)"); done
  "$bin/tetra" compare "${dirs[@]}" | tee "$out/overheads.txt" || failed=1
  "$bin/tetra" plot "${dirs[@]}" --seeds -o "$out/curves.png" --x tokens \
    --smooth 0.9 --title "loss against tokens: the seeds' mean and spread" ||
    failed=1
fi
exit $failed
