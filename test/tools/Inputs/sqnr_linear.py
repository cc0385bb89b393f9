"""Checks the per-linear SQNR of a metrics file against its pooled SQNR:
every measured step has "sqnr_db_linear", each linear with the operands of
its GEMM roles, and each pooled "role.operand" value lies within the range
of that key's per-linear values (the pooled energies are their sums). Prints
the first measured step's linears and keys.
    sqnr_linear.py METRICS"""
import json
import sys

first = True
for record in map(json.loads, open(sys.argv[1])):
    pooled = record.get("sqnr_db")
    if pooled is None:
        continue
    linear = record["sqnr_db_linear"]
    for key, value in pooled.items():
        values = [v[key] for v in linear.values() if key in v]
        if not values or not min(values) - 1e-9 <= value <= max(values) + 1e-9:
            print("step %d: pooled %s = %g dB outside the linears' [%g, %g]"
                  % (record["step"], key, value, min(values or [0]),
                     max(values or [0])))
            sys.exit(1)
    if first:
        print("step %d: %d linears" % (record["step"], len(linear)))
        for name in sorted(linear):
            print("%s %s" % (name, " ".join(sorted(linear[name]))))
        first = False
