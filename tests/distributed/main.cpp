// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// main() of flotilla_distributed_tcp and flotilla_distributed_mpi: the multi-process tests of one
// transport, each a subcommand (tests/common/test_program.hpp says why they share an executable).
#include "../common/test_program.hpp"

namespace flotilla_test {
// The tests' entry points, each defined in its own file and namespace.
namespace sync_equivalence { int run(const Program&, int, char**); }
namespace async_training { int run(const Program&, int, char**); }
namespace checkpoint_resume { int run(const Program&, int, char**); }
namespace pipeline_processes { int run(const Program&, int, char**); }
namespace sparse_equivalence { int run(const Program&, int, char**); }
namespace reproducible_training { int run(const Program&, int, char**); }
#if defined(FLOTILLA_TEST_TCP)
namespace ps_recovery { int run(const Program&, int, char**); }
namespace ps_trainer_recovery { int run(const Program&, int, char**); }
namespace ps_trainer_rejoin { int run(const Program&, int, char**); }
namespace ring_recovery { int run(const Program&, int, char**); }
namespace ps_restart { int run(const Program&, int, char**); }
namespace sparse_memory { int run(const Program&, int, char**); }
#endif
}  // namespace flotilla_test

int main(int argc, char** argv) {
  namespace t = flotilla_test;
  return t::dispatch(argc, argv,
                     {
                         {"sync-equivalence", t::sync_equivalence::run},    // sync_equivalence.cpp
                         {"async-training", t::async_training::run},        // async_training.cpp
                         {"checkpoint-resume", t::checkpoint_resume::run},  // checkpoint_resume.cpp
                         {"pipeline", t::pipeline_processes::run},          // ../pipeline/multiprocess.cpp
                         {"sparse-equivalence", t::sparse_equivalence::run},  // sparse_equivalence.cpp
                         {"reproducible", t::reproducible_training::run},    // reproducible_training.cpp
#if defined(FLOTILLA_TEST_TCP)
                         {"ps-recovery", t::ps_recovery::run},                  // ps_recovery.cpp
                         {"ps-trainer-recovery", t::ps_trainer_recovery::run},  // ps_trainer_recovery.cpp
                         {"ps-trainer-rejoin", t::ps_trainer_rejoin::run},      // ps_trainer_rejoin.cpp
                         {"ring-recovery", t::ring_recovery::run},              // ring_recovery.cpp
                         {"ps-restart", t::ps_restart::run},                    // ps_restart.cpp
                         {"sparse-memory", t::sparse_memory::run},              // sparse_memory.cpp
#endif
                     });
}
