#!/usr/bin/env bash
# Copies the header-only build dependencies of the CUDA tests (Eigen, doctest) with their CMake
# package files into .gpu-deps/ (git-ignored), for a GPU machine that has nvcc and CMake but not
# these and cannot fetch them. Run here, then carry .gpu-deps to the GPU machine and run
# scripts/gpu_check.sh there (docs/gpu.md, "Running the GPU checks").
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
du -sh "$deps"
