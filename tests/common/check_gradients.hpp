// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
// CHECK_GRADIENTS(flotilla::testing::check_layer<...>()): every compared tensor within the
// check's tolerance, the report printed when not, and at least one tensor compared.
#include <doctest/doctest.h>

#define CHECK_GRADIENTS(result)   \
  do {                            \
    const auto r_ = (result);     \
    INFO(r_.report());            \
    CHECK(r_.passed());           \
    CHECK(r_.tensors.size() > 0); \
  } while (0)
