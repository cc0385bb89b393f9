#!/usr/bin/env bash
# The tests that need an NVIDIA GPU, for the GPU machine (which has no LLVM
# or MLIR). Build here first — `cmake --build build --target BackendTests` —
# then run this script there with the binary carried along; through the
# device tool:
#   run(command="tools/gpu_tests.sh", carry=["build/test/unit/BackendTests"])
# It prints the device, runs every GPU test (none may be skipped there), and
# leaves the log in $OUT (or /tmp) as gpu_tests.log.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp}"
mkdir -p "$out"
log="$out/gpu_tests.log"
binary=build/test/unit/BackendTests
if [[ ! -x "$binary" ]]; then
  echo "gpu_tests.sh: $binary is missing: build it and carry it" >&2
  exit 1
fi
{
  nvidia-smi -L || true
  "$binary" --gtest_filter='Cuda*' --gtest_brief=0
} 2>&1 | tee "$log"
if grep -q '\[  SKIPPED \]' "$log"; then
  echo "gpu_tests.sh: GPU tests were skipped: no usable GPU here" >&2
  exit 1
fi
grep -q '\[  PASSED  \]' "$log"
