#!/usr/bin/env bash
# The main job: installs what is missing, builds, checks Llama 3.1-8B and the
# study's policy grid, then trains the tiny Llama on the bundled C4 sample on
# the CPU twice — BF16, and the study's fix (MXFP4 in all three GEMMs with a
# deterministic Hadamard rotation in Wgrad) — and compares them: a table and
# a picture of the loss curves.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
tetra=build/bin/tetra
out=build/demo
rm -rf "$out" && mkdir -p "$out"

echo
echo "== Llama 3.1-8B and the study's policy grid, checked"
"$tetra" check models/llama3_8b.tetra models/policies/*.tetra
echo
echo "== What the study's fix does to each GEMM of one linear"
"$tetra" explain-policy models/llama_tiny.tetra models/policies/fp4_all_hadamard.tetra \
  --linear 'layers.0.attn.wq'

run=models/runs/tiny_c4_cpu.tetra
for policy in bf16 fp4_all_hadamard; do
  echo
  echo "== Training llama_tiny on the C4 sample with policy $policy"
  "$tetra" train "$run" --policy "models/policies/$policy.tetra" --out "$out/$policy"
done

echo
echo "== Loss on the training stream (logged every 10 steps)"
python3 - "$out"/bf16/metrics.jsonl "$out"/fp4_all_hadamard/metrics.jsonl <<'PY'
import json, sys
runs = {}
for path in sys.argv[1:]:
    rows = [json.loads(line) for line in open(path)]
    runs[path.split("/")[-2]] = rows
steps = sorted({r["step"] for rows in runs.values() for r in rows})
print("step".rjust(6) + "".join(name.rjust(20) for name in runs))
for step in steps:
    cells = []
    for rows in runs.values():
        value = next((r["loss"] for r in rows if r["step"] == step), None)
        cells.append(("%.4f" % value if value is not None else "-").rjust(20))
    print(str(step).rjust(6) + "".join(cells))
speeds = "".join(("%.0f tok/s" % rows[-1]["tokens_per_s"]).rjust(20)
                 for rows in runs.values())
print("speed".rjust(6) + speeds)
print()
print("Quantization error (SQNR, dB) per GEMM operand at the last measured step:")
keys = ["fprop.x", "fprop.w", "dgrad.dy", "dgrad.w", "wgrad.dy", "wgrad.x"]
print("".rjust(20) + "".join(k.rjust(10) for k in keys))
for name, rows in runs.items():
    last = [r["sqnr_db"] for r in rows if "sqnr_db" in r][-1]
    print(name.rjust(20) + "".join(("%.1f" % last[k] if k in last else "f32").rjust(10) for k in keys))
PY
echo
echo "== The study's measure: tokens to reach bf16's loss (tetra compare, docs/tools/compare.md)"
"$tetra" compare "$out"/bf16 "$out"/fp4_all_hadamard
"$tetra" plot "$out"/bf16 "$out"/fp4_all_hadamard -o "$out/curves.png" \
  --title "llama_tiny on C4: bf16 vs fp4_all_hadamard"
"$tetra" plot "$out"/bf16 "$out"/fp4_all_hadamard -o "$out/sqnr_wgrad.png" \
  --metric sqnr_db.wgrad.dy --title "SQNR of Wgrad's output gradient (dB)"
echo "The pictures: $out/curves.png, $out/sqnr_wgrad.png"
