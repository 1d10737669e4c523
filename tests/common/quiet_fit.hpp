// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
// FitOptions for tests: `epochs` epochs, no progress output.
#include <cstddef>

#include "flotilla/train/fit_options.hpp"

namespace flotilla_test {

inline flotilla::FitOptions quiet(std::size_t epochs = 1) {
  flotilla::FitOptions f;
  f.epochs = epochs;
  f.log = nullptr;
  return f;
}

}  // namespace flotilla_test
