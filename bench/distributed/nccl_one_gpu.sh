#!/usr/bin/env bash
# NCCL on one GPU (docs/benchmarks.md): the tiny run with accumulation 2
# trained plainly, then as a launched run of one rank (RANK=0 WORLD_SIZE=1:
# NCCL all-reduces every gradient buffer each step) — the losses and norms
# must be identical — then --gpus 2, which on a one-GPU machine must name
# the rank without a GPU. Compile the bundle here first (see
# tiny_acc2_h200.tetra), then, through the device tool:
#   run(command="bash bench/distributed/nccl_one_gpu.sh",
#       carry=["build/bin/tetra-run", "build/dp"])
set -u
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))'):${LD_LIBRARY_PATH:-}
ls ${LD_LIBRARY_PATH%%:*} | head -3
data=(--data data/c4/c4-train.sample.json.gz --eval-data data/c4/c4-validation.sample.json.gz)
b=build/dp/tiny-acc2.tbundle
timeout 120 build/bin/tetra-run $b "${data[@]}" --steps 20 --out /tmp/A --quiet; echo "plain rc $?"
RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29517 timeout 120 build/bin/tetra-run $b "${data[@]}" --steps 20 --out /tmp/B --quiet; echo "nccl 1-rank rc $?"
python3 - <<'PY'
import json
a={r["step"]:(r["loss"],r.get("grad_norm")) for r in map(json.loads,open("/tmp/A/metrics.jsonl")) if "loss" in r}
b={r["step"]:(r["loss"],r.get("grad_norm")) for r in map(json.loads,open("/tmp/B/metrics.jsonl")) if "loss" in r}
print("steps", len(a), len(b), "identical" if a==b else "DIFFERENT", a.get(20), b.get(20))
PY
timeout 120 build/bin/tetra-run $b "${data[@]}" --steps 20 --gpus 2 --out /tmp/C --quiet; echo "gpus 2 on one GPU rc $?"
