#!/usr/bin/env bash
# Installs what etnn's build, tests, benchmarks and examples need, if anything is missing: Debian
# packages (PyTorch for the interoperability tests is Debian's python3-torch, LibTorch is
# libtorch-dev, and libopenblas0-pthread makes OpenBLAS the BLAS both call instead of the reference
# BLAS; libdnnl-dev gives gemm_rate oneDNN as a peer; fortunes is examples/char_lm's corpus), and from PyPI the reference safetensors implementation and matplotlib. scripts/compare.sh's
# PyTorch 2.x and JAX peers live in a virtual environment of their own, which compare.sh makes.
set -euo pipefail

packages=(g++ clang-14 libclang-rt-14-dev cmake make ccache python3 python3-pip python3-numpy python3-matplotlib python3-torch libeigen3-dev zlib1g-dev
          libtorch-dev libopenblas0-pthread libdnnl-dev python3-venv libopenmpi-dev openmpi-bin doctest-dev libbenchmark-dev dataset-fashion-mnist
          fortunes)
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

# From PyPI: the reference safetensors implementation (checkpoint interoperability tests), for the
# python3 on PATH and for Debian's own, which has python3-torch (they differ where pyenv or a
# virtual environment comes first on PATH); numpy and matplotlib too where that python lacks them
# (Debian's come from the packages above, so PyPI's newer numpy never shadows the one torch needs).
for python in python3 /usr/bin/python3; do
  wanted=()
  for module in safetensors numpy matplotlib; do
    "$python" -c "import $module" 2>/dev/null || wanted+=("$module")
  done
  [ ${#wanted[@]} -eq 0 ] && continue
  "$python" -m pip install -q --disable-pip-version-check "${wanted[@]}" 2>/dev/null ||
    "$python" -m pip install -q --disable-pip-version-check --break-system-packages "${wanted[@]}"
done
