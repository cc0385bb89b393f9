"""Compares the losses two metrics files record for the steps both have:
prints "identical N steps" when every one is equal (as written: the exact
float), else the first difference."""
import json
import sys

def losses(path):
    return {r["step"]: r["loss"] for r in map(json.loads, open(path)) if "loss" in r}

a, b = losses(sys.argv[1]), losses(sys.argv[2])
common = sorted(set(a) & set(b))
for step in common:
    if a[step] != b[step]:
        print("step %d differs: %r vs %r" % (step, a[step], b[step]))
        sys.exit(1)
print("identical %d steps" % len(common))
