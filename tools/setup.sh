#!/usr/bin/env bash
# Installs what Tetra needs to build and test, with apt-get, on Debian 12
# (bookworm; LLVM/MLIR 22 come from bookworm-security). Idempotent: installs
# only what is missing, and touches the package lists only then.
set -euo pipefail

packages=(
  cmake ninja-build ccache python3
  clang-22 lld-22 llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  libgtest-dev
  zlib1g-dev  # gzip data and text files, CRC-32: runtime/data, checkpoint, tokenizer
  libpcre2-dev pkg-config  # runtime/tokenizer: pre-tokenization regexes (found through pkg-config)
  libclang-rt-22-dev  # libFuzzer and the sanitizers: tools/tetra-fuzz-frontend
  liblld-22-dev  # lld as a library: gfx950 HSACO linked in process (driver/AmdgpuCompiler)
  libcairo2-dev fonts-dejavu-core  # runtime/plot: tetra plot's PNG/SVG/PDF, text in DejaVu Sans
  libfmt-dev  # formatting of messages, tables and numbers (used header-only)
  libgloo-dev  # runtime/distributed: the CPU ranks' collectives (tetra train --ranks N)
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null |
      grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
