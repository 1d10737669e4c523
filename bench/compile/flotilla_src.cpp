// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// flotilla's out-of-line definitions for bench/build_time.py's separate-compilation variant: what a
// program compiles once, whatever its number of translation units.
#define FLOTILLA_SOURCE
#include <flotilla.hpp>
