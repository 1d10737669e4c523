// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
// The multi-process tests (tests/distributed/*.cpp, tests/pipeline/multiprocess.cpp) are built into
// one executable per transport, each test a subcommand:
//
//   flotilla_distributed_tcp ring-recovery drive continue
//   mpirun -n 4 flotilla_distributed_mpi pipeline 2 2 1f1b 3
//
// Why one executable: every test instantiates Trainers of small networks, and most of those
// instantiations are the same from test to test. Compiled as one unity translation unit
// (UNITY_BUILD in tests/distributed/CMakeLists.txt) they compile once: the 8 TCP programs took
// 235 s of compiling apart and 68 s together, and compiling is most of CI's time.
//
// Each test file defines its entry point in a namespace of its own, as
//   int run(const flotilla_test::Program& self, int argc, char** argv)
// where argv[0] is the subcommand and argv[1..] its arguments (what main() had before), and a
// driver starts more ranks of itself with self.command({...}).
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

namespace flotilla_test {

/// The executable and the subcommand a test runs as: what a driver needs to start its own ranks.
struct Program {
  std::string executable;
  std::string subcommand;

  /// This test with `args`, as a command line for transport::launch.
  std::vector<std::string> command(std::initializer_list<std::string> args) const {
    std::vector<std::string> c{executable, subcommand};
    c.insert(c.end(), args);
    return c;
  }
  /// The command as a user types it, for usage messages.
  std::string name() const { return executable + " " + subcommand; }
};

/// One test of a multi-test executable.
struct Subcommand {
  const char* name;
  int (*run)(const Program& self, int argc, char** argv);
};

/// main() of a multi-test executable: runs the subcommand argv[1] with the arguments after it.
inline int dispatch(int argc, char** argv, std::initializer_list<Subcommand> tests) {
  if (argc > 1)
    for (const auto& t : tests)
      if (std::strcmp(argv[1], t.name) == 0) return t.run(Program{argv[0], t.name}, argc - 1, argv + 1);
  if (argc > 1) std::fprintf(stderr, "%s: unknown test '%s'\n", argv[0], argv[1]);
  std::fprintf(stderr, "usage: %s TEST [ARGUMENTS]\nTEST, one of:", argv[0]);
  for (const auto& t : tests) std::fprintf(stderr, " %s", t.name);
  std::fprintf(stderr, "\n");
  return 2;
}

}  // namespace flotilla_test
