// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_LINKAGE_HPP_INCLUDED
#define FLOTILLA_CORE_LINKAGE_HPP_INCLUDED
// How flotilla's out-of-line code is compiled: in every translation unit that uses it (header-only,
// the default), or once for the whole program (separate compilation, opt-in).
//
// Most of flotilla is templates on the model, which must be compiled where they are used. The rest
// (checkpoint files, plots, metrics, the progress bar, the timeline, data files) is the same code
// in every program, and in a header-only build every translation unit that trains a model compiles
// it again: about a third of such an object's code. Separate compilation, in the style of Asio and
// spdlog, compiles it once:
//
//   - define FLOTILLA_SEPARATE_COMPILATION in every translation unit of the program (CMake: link
//     flotilla_compiled, which flotilla's own build makes, or add the definition yourself), and
//   - compile its definitions in exactly one .cpp of the program, which includes nothing but
//     <flotilla/src.hpp> (or, with the single header: `#define FLOTILLA_SOURCE` and then
//     `#include <flotilla.hpp>`).
//
// Each header that has such code declares it, marked FLOTILLA_DECL, and defines it at its end in a
// block that only FLOTILLA_IMPLEMENTATION translation units compile:
//
//   FLOTILLA_DECL void write_report(const Report& r);          // declaration, documented
//   ...
//   #if FLOTILLA_IMPLEMENTATION
//   FLOTILLA_DECL void write_report(const Report& r) { ... }   // definition
//   #endif
//
// Header-only, FLOTILLA_DECL is `inline` and every translation unit has the definitions.

#if defined(FLOTILLA_SEPARATE_COMPILATION)
#define FLOTILLA_DECL
#if defined(FLOTILLA_SOURCE)
#define FLOTILLA_IMPLEMENTATION 1
#else
#define FLOTILLA_IMPLEMENTATION 0
#endif
#else
#define FLOTILLA_DECL inline
#define FLOTILLA_IMPLEMENTATION 1
#endif
#endif  // FLOTILLA_CORE_LINKAGE_HPP_INCLUDED
