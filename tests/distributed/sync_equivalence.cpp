// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Synchronous training across processes gives the parameters of one worker with an N-times batch.
//
// Every rank of a job started by flotilla-launch (TCP) or mpirun (MPI) runs this program. The
// workers train a small network in double on synthetic data with batch B each; afterwards rank 0
// trains the same network alone, in this process, with batch N*B, and compares. The job exits
// non-zero when they differ by more than float rounding of a double sum.
//
// Run as `flotilla_distributed_<backend> sync-equivalence MODE`, MODE one of:
//
//   ring        all ranks are workers (ring allreduce)
//   ring-float [HOSTS]
//               the same in float, within float rounding (1e-5); over TCP every bucket must be
//               summed through shared memory (no gradient byte on the wire), or with
//               FLOTILLA_SHARED_MEMORY=off through the sockets; with HOSTS > 1 (the ranks spread
//               evenly over that many hosts), hierarchically: the hosts' leaders' ring alone on
//               the wire
//   ring-syncbn a residual network with SyncBatchNorm (statistics over the global batch)
//   ps S        the last S ranks are parameter servers
//   ps-syncbn S the residual network with SyncBatchNorm on parameter servers
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../common/blobs.hpp"
#include "flotilla/flotilla.hpp"
#include "../common/process_backend.hpp"
#include "../common/test_program.hpp"

namespace flotilla_test::sync_equivalence {

using flotilla_test::Backend;
using flotilla_test::backend_options;
using flotilla_test::rank_and_size;

using namespace flotilla;
using Net = Sequential<Input<1, 6, 6>, Conv2D<3, 3>, ReLU, MaxPool2D<2>, Flatten, Dense<10>, Tanh, Dropout<10>, Dense<3>>;
using M = Model<Net, SoftmaxCrossEntropy, optim::Momentum, double>;
using MFloat = Model<Net, SoftmaxCrossEntropy, optim::Momentum, float>;
// Residual blocks with batch statistics over the global batch: every BatchNorm meets the other
// workers in forward and backward, so the job equals one worker with the N-times batch.
using NormNet = Sequential<Input<1, 6, 6>, Conv2D<4, 3, 1, 1>, SyncBatchNorm2D, ReLU,
                           Residual<Block<Conv2D<4, 3, 1, 1>, SyncBatchNorm2D, ReLU, Conv2D<4, 3, 1, 1>, SyncBatchNorm2D>>, ReLU,
                           Flatten, Dense<10>, SyncBatchNorm1D, Tanh, Dense<3>>;
using MNorm = Model<NormNet, SoftmaxCrossEntropy, optim::Momentum, double>;

#if defined(FLOTILLA_TEST_TCP)
constexpr const char* backend_tag = "tcp";
#else
constexpr const char* backend_tag = "mpi";
#endif

/// The timeline this process wrote: a worker's own file (rank 0 at `trace`, rank k at
/// trace.rank<k>), holding its rank's compute and communication events on the machine's steady
/// clock; none from a parameter server. Returns what is wrong, or "".
static std::string check_trace(const std::filesystem::path& mine, std::size_t rank, bool worker, const char* communication) {
  std::ifstream in(mine);
  if (!worker) return in ? "parameter server rank " + std::to_string(rank) + " wrote a timeline, " + mine.string() : "";
  if (!in) return "worker rank " + std::to_string(rank) + " wrote no timeline at " + mine.string();
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  const std::string pid = "\"pid\":" + std::to_string(rank) + ",";
  for (const std::string& needed : {std::string("\"forward+backward\""), std::string(communication), pid,
                                    std::string("\"clock\":\"steady\""), std::string("\"steady_to_unix_us\":")})
    if (json.find(needed) == std::string::npos) return mine.string() + " lacks " + needed;
  // Timestamps on the steady clock that every process of the machine shares: the job's events
  // happened within the last minutes.
  const std::size_t at = json.find("\"ts\":");
  if (at == std::string::npos) return mine.string() + " has no timestamps";
  const double ts = std::stod(json.substr(at + 5, 32));
  const double now = flotilla::Timeline::microseconds(flotilla::Timeline::clock::now());
  if (!(ts <= now && ts > now - 600e6))
    return mine.string() + ": first timestamp " + std::to_string(ts) + " us is not on this machine's steady clock (now " +
           std::to_string(now) + " us)";
  return "";
}

template <class Policy, class M = sync_equivalence::M>
static int check(std::size_t servers, const char* what, const char* tag, std::size_t hosts = 1) {
  using T = typename M::scalar_type;
  const auto data = flotilla_test::blobs<T>(490, 11);  // 490: the last global batch is partial and split unevenly
  TrainerOptions<M> o;
  o.optimizer.learning_rate = 0.05;
  o.batch_size = 8;
  o.servers = servers;
  o.seed = 23;
  o.workers = 0;  // as launched
  auto transport = backend_options();
#if defined(FLOTILLA_TEST_MPI)
  // This network's buckets are smaller than where MPI_Allreduce is the faster (8 KiB): across
  // hosts, take the hierarchical sum at every size, so that its bytes can be checked.
  if (hosts > 1) transport.hierarchical_min_bytes = 0;
#endif
  Trainer<M, Policy, Backend> distributed(o, Policy{}, transport);
  FitOptions f;
  f.epochs = 2;
  f.log = nullptr;
  const auto [rank, world] = rank_and_size();
  // A name of this job's own: the tests that differ only in FLOTILLA_SHARED_MEMORY may run at once.
  const char* shared_memory = std::getenv("FLOTILLA_SHARED_MEMORY");
  const std::string base = std::string("sync_equivalence.") + backend_tag + "." + tag +
                           (shared_memory ? std::string(".shared_memory_") + shared_memory : std::string()) + "." +
                           std::to_string(world) + ".trace.json";
  const std::filesystem::path mine = rank == 0 ? base : base + ".rank" + std::to_string(rank);
  std::filesystem::remove(mine);
  f.trace_file = base;
  const auto history = distributed.fit(data, nullptr, f);
  constexpr bool parameter_server = std::is_same_v<Policy, policy::Synchronous<topology::ParameterServer>>;
  const bool worker = !parameter_server || rank < world - servers;
  if (const std::string wrong = check_trace(mine, rank, worker, parameter_server ? "\"push shard " : world > 1 ? "\"allreduce bucket " : "\"update\"");
      !wrong.empty()) {
    std::printf("%s: %s\n", what, wrong.c_str());
    return 1;
  }
  std::filesystem::remove(mine);
  f.trace_file.clear();  // not for the reference run below
  if (history.empty()) return 0;  // a parameter server: nothing to compare
  const auto workers = static_cast<std::size_t>(history.back().extra.front().second);
  // Over TCP always; over MPI across hosts, where the sum is flotilla's hierarchical one (on one
  // host MPI_Allreduce's bytes are MPI's own business).
  constexpr bool tcp = std::string_view(backend_tag) == "tcp";
  if (std::is_same_v<T, float> && (tcp || hosts > 1)) {
    // Float buckets go through the shared-memory allreduce (the default for ranks on one host):
    // nothing on the wire per step; with FLOTILLA_SHARED_MEMORY=off, the gradients' bytes. Over H
    // hosts of L ranks each, hierarchically: the H leaders' ring sends 2(H-1) of the gradients'
    // bytes a step in all (each chunk of each bucket twice, but by the leader that completes it).
    const char* setting = std::getenv("FLOTILLA_SHARED_MEMORY");
    const bool sockets = setting && (std::string(setting) == "off" || std::string(setting) == "0");
    const double gradient_bytes = static_cast<double>(std::as_const(distributed).parameters().size() * sizeof(float));
    const double per_host = static_cast<double>(workers) / static_cast<double>(hosts);
    const double wire_expected = 2.0 * static_cast<double>(hosts - 1) / static_cast<double>(workers) * gradient_bytes;
    // Through shared memory, each step's sum moves 2(L-1)/L of the gradients' bytes each way, on
    // average over the ranks of a host of L (TrafficCounters::shared_memory_bytes_*): on one host
    // the ring's figure; across hosts the leader reads its L-1 ranks' values and each of them the
    // total. Over the sockets, none.
    const double shared_expected = sockets ? 0.0 : 2.0 * (per_host - 1) / per_host * gradient_bytes;
    int shared_keys = 0;
    for (const auto& [key, value] : history.back().extra) {
      shared_keys += key.starts_with("shared_memory_bytes_");
      if (key == "payload_bytes_sent_per_step" && !sockets && hosts > 1 &&
          std::abs(value - wire_expected) > 1e-9 * wire_expected) {
        std::printf("%s: %g payload bytes sent per step, expected %g: 2(H-1)/N of %g gradient bytes, H = %zu, N = %zu\n",
                    what, value, wire_expected, gradient_bytes, hosts, workers);
        return 1;
      }
      if (key == "payload_bytes_sent_per_step" && hosts == 1 && (sockets ? value == 0 : value != 0)) {
        std::printf("%s: %g payload bytes sent per step, expected %s\n", what, value,
                    sockets ? "the gradients' over the sockets" : "none through shared memory");
        return 1;
      }
      if ((key == "shared_memory_bytes_sent_per_step" || key == "shared_memory_bytes_received_per_step") &&
          std::abs(value - shared_expected) > 1e-9 * std::max(1.0, shared_expected)) {
        std::printf("%s: %s %.6g, expected %.6g (2(N-1)/N of %g gradient bytes, N = %zu%s)\n", what, key.c_str(), value,
                    shared_expected, gradient_bytes, workers, sockets ? ", but over the sockets: 0" : "");
        return 1;
      }
    }
    if (shared_keys != 2) {
      std::printf("%s: the epoch record has %d shared_memory_bytes_* values, expected 2\n", what, shared_keys);
      return 1;
    }
  }
  if (rank != 0) return 0;  // rank 0 alone trains the reference and compares

  TrainerOptions<M> single = o;
  single.batch_size = o.batch_size * workers;
  single.workers = 1;
  // In this process, beside the launched job (the launcher's variables would refuse it otherwise).
  Trainer<M> reference(single, {}, transport::InProcessOptions{.beside_launched_job = true});
  reference.fit(data, nullptr, f);
  double diff = 0, norm = 0;
  const auto a = std::as_const(distributed).parameters(), b = std::as_const(reference).parameters();
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    norm = std::max(norm, std::abs(static_cast<double>(b[i])));
  }
  std::printf("%s, %zu workers: max |difference| / max |parameter| = %.3g\n", what, workers, diff / norm);
  return diff / norm < (std::is_same_v<T, float> ? 1e-5 : 1e-12) ? 0 : 1;
}

int run(const Program& self, int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "ring";
    if (mode == "ring") return check<policy::Synchronous<topology::Ring>>(1, "ring allreduce", "ring");
    if (mode == "ring-float") {
      const std::size_t hosts = argc > 2 ? static_cast<std::size_t>(std::stoul(argv[2])) : 1;
      return check<policy::Synchronous<topology::Ring>, MFloat>(1, "ring allreduce, float", "ring-float", hosts);
    }
    if (mode == "ring-syncbn") return check<policy::Synchronous<topology::Ring>, MNorm>(1, "ring allreduce, SyncBatchNorm", "ring-syncbn");
    if (mode == "ps" || mode == "ps-syncbn") {
      const std::size_t servers = argc > 2 ? static_cast<std::size_t>(std::stoul(argv[2])) : 1;
      if (mode == "ps-syncbn")
        return check<policy::Synchronous<topology::ParameterServer>, MNorm>(servers, "parameter server, SyncBatchNorm", "ps-syncbn");
      return check<policy::Synchronous<topology::ParameterServer>>(servers, "parameter server", "ps");
    }
    std::fprintf(stderr, "usage: %s ring | ring-float [HOSTS] | ring-syncbn | ps SERVERS | ps-syncbn SERVERS\n", self.name().c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace flotilla_test::sync_equivalence
