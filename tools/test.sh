#!/usr/bin/env bash
# Every test: installs what is missing, builds, then runs lit (FileCheck tests
# and the GoogleTest units) through `check-tetra`.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
cmake --build build --target check-tetra
