"""Compares the losses two metrics files record for the steps both have:
prints "identical N steps" when every one is equal (as written: the exact
float), else the first difference. With a third argument R, losses within a
relative R of each other pass too: "within R over N steps" (exit 1 past it)."""
import json
import sys

def losses(path):
    return {r["step"]: r["loss"] for r in map(json.loads, open(path)) if "loss" in r}

a, b = losses(sys.argv[1]), losses(sys.argv[2])
tolerance = float(sys.argv[3]) if len(sys.argv) > 3 else None
common = sorted(set(a) & set(b))
for step in common:
    if a[step] == b[step]:
        continue
    if tolerance is None or abs(a[step] - b[step]) > tolerance * abs(a[step]):
        print("step %d differs: %r vs %r" % (step, a[step], b[step]))
        sys.exit(1)
if tolerance is not None and any(a[s] != b[s] for s in common):
    print("within %g over %d steps" % (tolerance, len(common)))
else:
    print("identical %d steps" % len(common))
