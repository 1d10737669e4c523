// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The single_header consumer's second translation unit, on the whole single header too, so that a
// header definition missing `inline` (defined in both units) fails to link.
#include <flotilla.hpp>

const char* single_header_version() { return FLOTILLA_VERSION_STRING; }
