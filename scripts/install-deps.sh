#!/usr/bin/env bash
# Installs what etnn's build, tests, benchmarks and examples need, if anything is missing: Debian
# packages, and from PyPI the reference safetensors implementation and matplotlib.
set -euo pipefail

packages=(g++ cmake make ccache python3 libeigen3-dev zlib1g-dev libopenmpi-dev openmpi-bin doctest-dev libbenchmark-dev
          dataset-fashion-mnist)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# From PyPI: the reference safetensors implementation (checkpoint interoperability test) and
# matplotlib (scripts/plot_training.py).
if ! python3 -c "import safetensors.numpy, numpy, matplotlib" 2>/dev/null; then
  python3 -m pip install -q --disable-pip-version-check safetensors numpy matplotlib 2>/dev/null ||
    python3 -m pip install -q --disable-pip-version-check --break-system-packages safetensors numpy matplotlib
fi
