"""Rewrites a step bundle's checksum file after a test edits the bundle, so
that tetra-run's later checks (runtime version, first_launch) are reached:
FNV-1a 64 over each file's name and bytes, in the manifest's order."""
import json
import sys

bundle = sys.argv[1]
manifest = json.load(open(f"{bundle}/manifest.json"))
files = ["manifest.json", "schedule.json", "run_plan.json", "reference.json"]
files += [code["file"] for code in manifest["code"]]
h = 0xCBF29CE484222325
for name in files:
    for byte in name.encode() + open(f"{bundle}/{name}", "rb").read():
        h ^= byte
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
open(f"{bundle}/checksum", "w").write(f"fnv1a64 {h:016x}\n")
