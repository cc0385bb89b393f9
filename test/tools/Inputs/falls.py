"""For each metrics file: does the logged training loss end well below where
it started (below 70% of its first value), with every value finite?"""
import json
import math
import sys

for path in sys.argv[1:]:
    losses = [r["loss"] for r in map(json.loads, open(path)) if "loss" in r]
    finite = all(math.isfinite(x) for x in losses)
    ok = finite and losses[-1] < 0.7 * losses[0]
    print("%s: %s from %.4f to %.4f" % (path, "falls" if ok else "rises",
                                        losses[0], losses[-1]))
