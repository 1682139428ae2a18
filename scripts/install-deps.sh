#!/usr/bin/env bash
# Installs the Debian packages etnn's build, tests, benchmarks and examples need, if any is missing.
set -euo pipefail

packages=(g++ cmake make ccache python3 libeigen3-dev zlib1g-dev libopenmpi-dev openmpi-bin doctest-dev libbenchmark-dev
          dataset-fashion-mnist)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing: ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
