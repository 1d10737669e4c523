// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_SRC_HPP_INCLUDED
#define FLOTILLA_SRC_HPP_INCLUDED
// The definitions of flotilla's out-of-line code, for a program built with separate compilation
// (see flotilla/core/linkage.hpp): include this header, and nothing else, in exactly one .cpp of
// the program, compiled like its other translation units (FLOTILLA_SEPARATE_COMPILATION defined).
// Header-only (the macro undefined), it is the umbrella header and nothing more.
#if defined(FLOTILLA_SEPARATE_COMPILATION) && defined(FLOTILLA_DECL) && !defined(FLOTILLA_SOURCE)
#error "<flotilla/src.hpp> must be the first flotilla header of its .cpp: a flotilla header included before it was compiled without the definitions"
#endif
#ifndef FLOTILLA_SOURCE
#define FLOTILLA_SOURCE 1
#endif

#include "flotilla/flotilla.hpp"
#endif  // FLOTILLA_SRC_HPP_INCLUDED
