// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// An interrupted out-of-process job resumed from its checkpoints ends with exactly the parameters
// of the same job run without a break. Every rank of a job started by flotilla-launch (TCP) or
// mpirun (MPI) runs this program; run_resume.cmake runs three jobs in one directory,
// `flotilla_distributed_<backend> checkpoint-resume DIR PHASE ring|ps S` with PHASE:
//
//   whole   2 epochs, no break; rank 0 saves the result
//   first   stops after 11 updates, sets every 4, none at exit
//   resume  resumes from the newest set (update 8), ends the 2 epochs; rank 0 compares, bit for bit
//
// With parameter servers ("ps S", the last S ranks), the servers' optimizer state and update
// counts live in the server processes and come back from their own shard files. With a pipeline
// ("pipeline P D": pipeline::Trainer, P stages x D replicas), each stage's rank of replica 0 saves
// its slice of the parameters and optimizer state, and the resumed job puts them together.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>

#include "../common/blobs.hpp"
#include "flotilla/flotilla.hpp"
#include "../common/process_backend.hpp"
#include "../common/test_program.hpp"

namespace flotilla_test::checkpoint_resume {

using flotilla_test::Backend;
using flotilla_test::backend_options;

using namespace flotilla;
using Net = Sequential<Input<1, 6, 6>, Conv2D<3, 3>, ReLU, MaxPool2D<2>, Flatten, Dense<10>, Tanh, Dropout<10>, Dense<3>>;
using M = Model<Net, SoftmaxCrossEntropy, optim::Adam, double>;

/// The settings every phase and every kind of job shares.
template <class Options>
static Options job_options(const std::string& phase) {
  Options o;
  o.optimizer.learning_rate = 0.01;
  o.schedule = schedule::Cosine{.total = 150};
  o.batch_size = 8;
  o.seed = phase == "resume" ? 99 : 23;  // the resumed job must take the seed from its checkpoint
  return o;
}

/// Runs `phase` with `trainer` (flotilla::Trainer or pipeline::Trainer): 0 when it did what it must.
template <class TrainerType>
static int run_phase(TrainerType& trainer, const std::filesystem::path& dir, const std::string& phase) {
  const auto data = flotilla_test::blobs<double>(490, 11);  // 490: the last global batch is partial
  FitOptions f;
  f.epochs = 2;
  f.log = nullptr;
  const auto sets = dir / "sets";
  std::ostringstream resume_log;  // where fit() says which set it resumed from
  if (phase == "first") {
    f.checkpoints.directory = sets;
    f.checkpoints.every_steps = 4;
    f.checkpoints.at_exit = false;
    f.max_steps = 11;
  } else if (phase == "resume") {
    f.checkpoints.directory = sets;
    f.checkpoints.resume = true;
    f.checkpoints.at_exit = false;
    f.log = &resume_log;
  } else if (phase != "whole") {
    std::fprintf(stderr, "unknown phase '%s'\n", phase.c_str());
    return 2;
  }
  const auto history = trainer.fit(data, nullptr, f);
  if (history.empty()) return 0;  // a parameter server
  bool rank_zero = std::getenv("FLOTILLA_RANK") == nullptr || std::string(std::getenv("FLOTILLA_RANK")) == "0";
#if defined(FLOTILLA_TEST_MPI)
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  rank_zero = r == 0;
#endif
  if (!rank_zero) return 0;
  if (phase == "whole") {
    trainer.save(dir / "whole.ckpt");
    return 0;
  }
  if (phase == "first") return trainer.step() == 11 ? 0 : 1;
  const checkpoint::Reader whole(dir / "whole.ckpt");
  const auto expected = whole.array<double>("parameters");
  const auto got = std::as_const(trainer).parameters();
  const bool same = expected.size() == got.size() && std::memcmp(expected.data(), got.data(), got.size_bytes()) == 0;
  // The first job saved sets at updates 4 and 8 and stopped at 11: the newest, 8, must be taken.
  const std::string said = resume_log.str();
  const std::string marker = "checkpoint: resuming from step ";
  const auto at = said.find(marker);
  const unsigned long long resumed = at == std::string::npos ? 0 : std::strtoull(said.c_str() + at + marker.size(), nullptr, 10);
  std::printf("resumed at update %llu (expected 8), ended at update %llu (uninterrupted: %llu); parameters %s\n", resumed,
              static_cast<unsigned long long>(trainer.step()), static_cast<unsigned long long>(whole.u64("step")),
              same ? "bit-identical" : "DIFFER");
  if (at == std::string::npos) std::printf("fit() did not say it resumed; its log:\n%s", said.c_str());
  return same && resumed == 8 && trainer.step() == whole.u64("step") ? 0 : 1;
}

template <class Policy>
static int run(const std::filesystem::path& dir, const std::string& phase, std::size_t servers) {
  auto o = job_options<TrainerOptions<M>>(phase);
  o.servers = servers;
  o.workers = 0;  // as launched
  Trainer<M, Policy, Backend> trainer(o, Policy{}, backend_options());
  return run_phase(trainer, dir, phase);
}

static int run_pipeline(const std::filesystem::path& dir, const std::string& phase, std::size_t stages, std::size_t replicas) {
  auto o = job_options<pipeline::TrainerOptions<M>>(phase);
  o.micro_batches = 2;
  o.replicas = replicas;
  pipeline::Trainer<M, Backend> trainer(pipeline::Plan::automatic<Net, double>(stages), o, backend_options());
  return run_phase(trainer, dir, phase);
}

int run(const Program& self, int argc, char** argv) {
  try {
    if (argc < 4) {
      std::fprintf(stderr, "usage: %s DIR whole|first|resume ring|ps SERVERS|pipeline STAGES REPLICAS\n", self.name().c_str());
      return 2;
    }
    const std::string mode = argv[3];
    if (mode == "ring") return run<policy::Synchronous<topology::Ring>>(argv[1], argv[2], 1);
    if (mode == "ps")
      return run<policy::Synchronous<topology::ParameterServer>>(argv[1], argv[2],
                                                                argc > 4 ? static_cast<std::size_t>(std::stoul(argv[4])) : 1);
    if (mode == "pipeline" && argc > 5)
      return run_pipeline(argv[1], argv[2], static_cast<std::size_t>(std::stoul(argv[4])), static_cast<std::size_t>(std::stoul(argv[5])));
    std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace flotilla_test::checkpoint_resume
