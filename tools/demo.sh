#!/usr/bin/env bash
# The main job: installs what is missing, builds, and shows what Tetra can do
# today — check Llama 3.1-8B and the study's policy grid, explain what one
# policy does to every GEMM, and quantize realistic tensors (a weight, an
# activation with outlier channels, a tiny gradient, an embedding) with the
# formats of the study to compare the damage. When the CPU trainer lands,
# this trains a small Llama.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh

echo
echo "== The model and the study's policy grid, checked"
build/bin/tetra check models/llama3_8b.tetra models/policies/*.tetra
echo
echo "== What the study's fix (fp4_all_hadamard) does to each GEMM of the tiny model"
build/bin/tetra explain-policy models/llama_tiny.tetra models/policies/fp4_all_hadamard.tetra \
  --linear 'layers.0.attn.wq'

out=build/demo
mkdir -p "$out"
python3 tools/make_sample_tensors.py "$out/sample.safetensors"
tetra=build/bin/tetra

echo
echo "== MXFP4 (E2M1, blocks of 32, E8M0 scales), as OCP MX v1.0 defines it"
"$tetra" quantize --format mxfp4 "$out/sample.safetensors"
echo
echo "== MXFP4 after a deterministic block Hadamard rotation (32) along the blocks"
"$tetra" quantize --format mxfp4 --rotate hadamard:32 "$out/sample.safetensors" \
  -o "$out/sample.mxfp4_h32.safetensors"

recipes=(
  "mxfp8_e4m3|--format mxfp8_e4m3"
  "mxfp4|--format mxfp4"
  "mxfp4 rceil|--format mxfp4 --scale-rule rceil"
  "mxfp4 H32|--format mxfp4 --rotate hadamard:32"
  "mxfp4 SR|--format mxfp4 --round stochastic --seed 1"
  "nvfp4|--format nvfp4"
)
: > "$out/summary.jsonl"
for recipe in "${recipes[@]}"; do
  label=${recipe%%|*}
  # shellcheck disable=SC2086
  "$tetra" quantize ${recipe#*|} --json "$out/sample.safetensors" |
    sed "s/^{/{\"recipe\":\"$label\",/" >> "$out/summary.jsonl"
done

echo
echo "== SQNR in dB per tensor and recipe (higher is better)"
python3 - "$out/summary.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
recipes = list(dict.fromkeys(r["recipe"] for r in rows))
tensors = list(dict.fromkeys(r["name"] for r in rows))
sqnr = {(r["name"], r["recipe"]): r["sqnr_db"] for r in rows}
width = max(len(r) for r in recipes) + 2
print("tensor".ljust(12) + "".join(r.rjust(width) for r in recipes))
print("-" * (12 + width * len(recipes)))
for t in tensors:
    print(t.ljust(12) + "".join(f"{sqnr[(t, r)]:{width}.2f}" for r in recipes))
PY
echo
echo "Dequantized tensors (MXFP4 + Hadamard, original basis): $out/sample.mxfp4_h32.safetensors"
