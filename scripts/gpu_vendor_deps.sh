#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# Copies the header-only build dependencies that a GPU machine may lack and be unable to fetch into
# .gpu-deps/ (git-ignored): Eigen and doctest with their CMake package files (the CUDA tests,
# scripts/gpu_check.sh; docs/gpu.md, "Running the GPU checks"), and the part of Boost that the TCP
# transport includes (scripts/scaling_check.sh). Run here, then copy .gpu-deps to that machine.
set -euo pipefail
cd "$(dirname "$0")/.."
deps=.gpu-deps
rm -rf "$deps"
mkdir -p "$deps/include" "$deps/share/eigen3" "$deps/lib/cmake"
cp -r /usr/include/eigen3 "$deps/include/"
cp -r /usr/share/eigen3/cmake "$deps/share/eigen3/"      # computes its prefix from its own place
cp -r /usr/include/doctest "$deps/include/"
cp -r /usr/lib/cmake/doctest "$deps/lib/cmake/"
# doctest's exported targets name /usr: make them relative to where they are.
sed -i 's|^set(_IMPORT_PREFIX "/usr")$|get_filename_component(_IMPORT_PREFIX "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)|' \
  "$deps/lib/cmake/doctest/doctestTargets.cmake"
# Boost: the folders of every Boost header that the TCP transport's programs include here (found
# by the compiler's own dependency listing), whole, so that another compiler's configuration
# headers are there too; about 25 MB of the 160 of /usr/include/boost.
mkdir -p "$deps/include/boost"
for f in bench/allreduce/tcp_busbw_bench.cpp bench/train/tcp_train_bench.cpp tools/flotilla_launch.cpp; do
  g++ -std=c++20 -M -Iinclude -I/usr/include/eigen3 "$f"
done | tr ' \\' '\n\n' | sed -n 's|^/usr/include/boost/||p' | awk -F/ '{print $1}' | sort -u |
  while read -r part; do cp -r "/usr/include/boost/$part" "$deps/include/boost/"; done
du -sh "$deps"
