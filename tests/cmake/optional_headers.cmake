# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# Headers under include/flotilla/ that need a dependency beyond Eigen and the standard library.
# flotilla/flotilla.hpp (and so the single header) does not include them, the umbrella test does not
# ask it to, and the header self-containment check skips them unless their option is on.
# A regex on the path relative to include/ (e.g. "flotilla/transport/mpi.hpp").
set(FLOTILLA_OPTIONAL_HEADER_REGEX "^flotilla/(transport/tcp[^/]*|transport/tcp/.*|transport/mpi[^/]*|transport/mpi/.*|cuda/.*)$")

# Headers that need nothing more, but that the umbrella leaves out all the same: the testing kits,
# which users' tests include by name (they are still checked to compile alone).
set(FLOTILLA_NOT_IN_UMBRELLA_REGEX "^flotilla/testing/.*$")
