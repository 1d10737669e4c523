#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# Installs what flotilla needs to build, test and train on Debian 12 (bookworm), with apt.
# Idempotent and non-interactive: installs only the packages that are missing, and does nothing
# (not even `apt-get update`) when all are there. Run as root, or as a user with sudo.
#
#   scripts/install-deps.sh
set -euo pipefail

packages=(
  build-essential cmake g++ clang git python3     # toolchain; python3 runs scripts/amalgamate.py
  libclang-rt-14-dev                              # clang's libFuzzer and sanitizer runtimes (tests/fuzz)
  libeigen3-dev libboost-dev libssl-dev doctest-dev  # Eigen 3.4; Boost's headers (Asio) and OpenSSL (TCP transport); tests
  libopenmpi-dev openmpi-bin                      # the MPI transport
  dataset-fashion-mnist                           # /usr/share/datasets/fashion-mnist, for examples
  iproute2 util-linux                             # ip, tc, unshare: the emulated cluster (scripts/cluster.sh)
)
# Without their Recommends (PyTorch's would bring a desktop's worth of plotting and GUI packages).
lean_packages=(
  python3-torch                                   # the PyTorch round trip of exported weights (tests/interop)
)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'; }
missing=()
for p in "${packages[@]}"; do
  installed "$p" || missing+=("$p")
done
missing_lean=()
for p in "${lean_packages[@]}"; do
  installed "$p" || missing_lean+=("$p")
done
if [ ${#missing[@]} -eq 0 ] && [ ${#missing_lean[@]} -eq 0 ]; then
  echo "install-deps: all $(( ${#packages[@]} + ${#lean_packages[@]} )) packages already installed"
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo -n)  # non-interactive: fail rather than wait for a password
else
  echo "install-deps: missing ${missing[*]} ${missing_lean[*]}; run as root or install sudo" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]} ${missing_lean[*]}"
"${as_root[@]}" apt-get update -q
# Recommends included: openmpi-bin recommends openssh-client, which mpirun wants even on one host.
if [ ${#missing[@]} -gt 0 ]; then
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi
if [ ${#missing_lean[@]} -gt 0 ]; then
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing_lean[@]}"
fi
