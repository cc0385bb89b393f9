#!/usr/bin/env bash
# The tests that need an NVIDIA GPU, for the GPU machine (which has no LLVM
# or MLIR). Build here first —
#   cmake --build build --target BackendTests GpuBundleTests
#   tools/make_gpu_bundles.sh
# — then run this script there with the binaries and bundles carried along;
# through the device tool:
#   run(command="tools/gpu_tests.sh",
#       carry=["build/test/unit/BackendTests", "build/test/unit/GpuBundleTests",
#              "build/gpu-bundles"])
# It prints the device, runs every GPU test (none may be skipped there):
# the CUDA backend's, then every kernel of every bundle against the numerics
# library, and leaves the log in $OUT (or /tmp) as gpu_tests.log.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp}"
mkdir -p "$out"
log="$out/gpu_tests.log"
for binary in build/test/unit/BackendTests build/test/unit/GpuBundleTests; do
  if [[ ! -x "$binary" ]]; then
    echo "gpu_tests.sh: $binary is missing: build it and carry it" >&2
    exit 1
  fi
done
bundles=(build/gpu-bundles/*.tbundle)
if [[ ! -d "${bundles[0]}" ]]; then
  echo "gpu_tests.sh: no bundles in build/gpu-bundles: run tools/make_gpu_bundles.sh and carry them" >&2
  exit 1
fi
{
  nvidia-smi -L || true
  build/test/unit/BackendTests --gtest_filter='Cuda*' --gtest_brief=0 || true
  for bundle in "${bundles[@]}"; do
    echo "== $bundle"
    TETRA_GPU_BUNDLE="$bundle" build/test/unit/GpuBundleTests --gtest_brief=0 || true
  done
} 2>&1 | tee "$log"
if grep -q '\[  SKIPPED \]' "$log"; then
  echo "gpu_tests.sh: GPU tests were skipped: no usable GPU here" >&2
  exit 1
fi
# Each test binary run ends with one PASSED line, or it failed (or crashed).
passed=$(grep -c '^\[  PASSED  \]' "$log" || true)
if grep -q '\[  FAILED  \]' "$log" || (( passed != 1 + ${#bundles[@]} )); then
  echo "gpu_tests.sh: GPU tests failed ($passed of $((1 + ${#bundles[@]})) runs passed)" >&2
  exit 1
fi
echo "gpu_tests.sh: every GPU test passed"
