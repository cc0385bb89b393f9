"""Checks that a metrics file reads as one uninterrupted run: prints
"steps A-B, each once, elapsed_s increasing" when the steps are A, A+1, ...,
B in order and elapsed_s never goes back, else the first problem."""
import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1])]
steps = [r["step"] for r in rows]
if steps != list(range(steps[0], steps[0] + len(steps))):
    sys.exit("steps are not consecutive, each once: %s" % steps)
elapsed = [r["elapsed_s"] for r in rows]
for a, b, step in zip(elapsed, elapsed[1:], steps[1:]):
    if b < a:
        sys.exit("elapsed_s goes back at step %d: %r -> %r" % (step, a, b))
print("steps %d-%d, each once, elapsed_s increasing" % (steps[0], steps[-1]))
