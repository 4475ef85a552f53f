#!/usr/bin/env bash
# Installs the Debian 12 packages kolo needs to build, test and benchmark. Idempotent: does
# nothing when everything is already there. Needs root (or sudo) for apt-get.
set -euo pipefail
pkgs=(g++ meson ninja-build pkg-config libgtest-dev libgmock-dev libbenchmark-dev
      libopenmpi-dev openmpi-bin libgloo-dev libibverbs-dev iproute2 ethtool python3
      nlohmann-json3-dev libcli11-dev
      iperf3 gnuplot-nox bible-kjv bible-kjv-text
      libopenblas-dev python3-torch libssl-dev clang libclang-rt-14-dev
      libtorch-dev pybind11-dev python3-dev python3-pytest
      python3-venv python3-mesonpy python3-pyproject-metadata python3-build
      qemu-system-x86 mmdebstrap e2fsprogs)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
