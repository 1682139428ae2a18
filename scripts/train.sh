#!/usr/bin/env bash
# Installs what is missing, builds the default example and trains it on Fashion-MNIST.
# Extra arguments go to the example: bash scripts/train.sh --epochs 3 --threads 1
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target mnist_mlp
exec build/release/examples/mnist_mlp "$@"
