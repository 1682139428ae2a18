#!/usr/bin/env bash
# Installs what is missing, builds everything (tests, examples, benchmarks) and runs the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release
ctest --preset release -j2
