// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// doctest's main for the MPI tests. Every rank runs every test case; test cases that communicate
// call Mpi::run with the world size, so they are collective. MPI is finalised at exit by flotilla.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
