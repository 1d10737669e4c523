// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_VERSION_HPP_INCLUDED
#define FLOTILLA_VERSION_HPP_INCLUDED
// flotilla's version, kept in step with project(VERSION ...) in CMakeLists.txt (a test checks).
#define FLOTILLA_VERSION_MAJOR 0
#define FLOTILLA_VERSION_MINOR 1
#define FLOTILLA_VERSION_PATCH 0
#define FLOTILLA_VERSION_STRING "0.1.0"

namespace flotilla {
inline constexpr int version_major = FLOTILLA_VERSION_MAJOR;
inline constexpr int version_minor = FLOTILLA_VERSION_MINOR;
inline constexpr int version_patch = FLOTILLA_VERSION_PATCH;
}  // namespace flotilla
#endif  // FLOTILLA_VERSION_HPP_INCLUDED
