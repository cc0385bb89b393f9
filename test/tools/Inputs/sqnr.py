"""Prints, for each metrics line with a "sqnr_db" object, the step and its
keys in order, and checks every value lies in [LOW, HIGH] dB:
    sqnr.py METRICS LOW HIGH"""
import json
import sys

low, high = float(sys.argv[2]), float(sys.argv[3])
for record in map(json.loads, open(sys.argv[1])):
    sqnr = record.get("sqnr_db")
    if sqnr is None:
        continue
    for key, value in sqnr.items():
        if not low <= value <= high:
            print("step %d: %s = %g dB outside [%g, %g]" %
                  (record["step"], key, value, low, high))
            sys.exit(1)
    print("step %d sqnr %s" % (record["step"], " ".join(sorted(sqnr))))
