// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// flotilla's out-of-line code, compiled once for a consumer built with FLOTILLA_SEPARATE_COMPILATION
// (include/flotilla/core/linkage.hpp): with the separate headers, <flotilla/src.hpp> alone; with
// the single header, FLOTILLA_SOURCE defined before it.
#ifdef FLOTILLA_CONSUMER_SINGLE_HEADER
#define FLOTILLA_SOURCE
#include <flotilla.hpp>
#else
#include <flotilla/src.hpp>
#endif

#if !FLOTILLA_IMPLEMENTATION
#error "flotilla's source translation unit does not compile its definitions"
#endif
