// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The GPU tests' main: without a usable CUDA device every test would fail for the same reason, so
// the whole run is skipped with that reason ("no CUDA device: <cudaGetErrorString>") and exit
// code 77, which CTest reports as skipped (SKIP_RETURN_CODE).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <iostream>

#include "flotilla/cuda/check.hpp"

int main(int argc, char** argv) {
  if (const auto reason = flotilla::cuda::no_device_reason()) {
    std::cout << "SKIPPED: " << *reason << '\n';
    return 77;
  }
  std::cout << "CUDA device: " << flotilla::cuda::device_description() << '\n';
  doctest::Context context(argc, argv);
  return context.run();
}
