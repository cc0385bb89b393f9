"""Synthetic metrics for test/tools/compare.test: OUT/bf16/seed=1,2 (loss
10.1 - tokens / 100 on average: tokens 100..1000; 0.1 and 0.11 s a step),
OUT/slow/seed=1,2 (the same descent over 10 % more tokens: 10.1 - tokens /
110; 0.2 and 0.22 s a step), OUT/flat (never below 5), OUT/old.jsonl (a
metrics file without "tokens"), OUT/gaps (a seed logging other steps than
its sibling)."""
import json, os, sys

out = sys.argv[1]


def write(path, run, losses, tokens=True, every=100, seconds=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for i, loss in enumerate(losses):
            record = {"run": run, "step": i + 1}
            if tokens:
                record["tokens"] = every * (i + 1)
            if seconds is not None:
                record["elapsed_s"] = round(seconds * (i + 1), 6)
            record["loss"] = loss
            f.write(json.dumps(record) + "\n")


ts = [100 * (i + 1) for i in range(10)]
for seed, offset, pace in ((1, -0.1, 1.0), (2, 0.3, 1.1)):
    write(f"{out}/bf16/seed={seed}/metrics.jsonl", f"tiny/bf16/seed={seed}",
          [10.0 - t / 100 + offset for t in ts], seconds=0.1 * pace)
    write(f"{out}/slow/seed={seed}/metrics.jsonl", f"tiny/slow/seed={seed}",
          [10.0 - t / 110 + offset for t in ts], seconds=0.2 * pace)
write(f"{out}/flat/metrics.jsonl", "tiny/flat", [5.0 + 1 / t for t in ts])
write(f"{out}/old.jsonl", "tiny/old", [5.0] * 3, tokens=False)
write(f"{out}/gaps/seed=1/metrics.jsonl", "tiny/gaps/seed=1", [9, 8, 7])
write(f"{out}/gaps/seed=2/metrics.jsonl", "tiny/gaps/seed=2", [9, 8, 7], every=50)
