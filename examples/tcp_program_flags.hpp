// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The flags that the TCP programs (fashion_mnist_tcp, fashion_mnist_gpu_tcp) add to the
// distributed examples' own: the transport's settings (transport::TcpFlags: --rank, --world-size,
// --coordinator, --bind, --timeout-ms, --connect-timeout-ms, --socket-buffer, --secret-file,
// --heartbeat-ms, --checksum-data, --shared-memory, --spin-us, --rejoin, each falling back to its
// FLOTILLA_* variable), and --on-worker-loss. Only TCP can go on without a lost worker, so the
// in-process and MPI programs do not offer it.
#pragma once

#include <flotilla/transport/tcp.hpp>

#include "distributed_common.hpp"

#include <string>

namespace example {

/// --on-worker-loss's text as TrainerOptions::on_worker_loss; ConfigError naming the flag and the
/// choices for anything else.
inline flotilla::WorkerLoss parse_worker_loss(const std::string& text) {
  if (text == "by-policy") return flotilla::WorkerLoss::by_policy;
  if (text == "stop") return flotilla::WorkerLoss::stop;
  if (text == "continue") return flotilla::WorkerLoss::continue_with_survivors;
  throw flotilla::ConfigError("--on-worker-loss: '" + text + "' is not one of by-policy, stop, continue");
}

class TcpProgramFlags {
 public:
  explicit TcpProgramFlags(flotilla::cli::Flags& flags)
      : tcp_(flags),
        on_worker_loss_(flags.add<std::string>(
            "on-worker-loss", "by-policy",
            "when a worker dies or stalls: by-policy (async goes on, sync stops), stop, or continue (sync too goes on "
            "with the workers left; run under flotilla-launch --keep-going; see docs/reliability.md, Recovery)")) {}

  /// The settings given (call after Flags::parse); ConfigError naming the flag for a bad value.
  TransportSettings<flotilla::transport::Tcp> settings() const {
    TransportSettings<flotilla::transport::Tcp> s;
    s.on_worker_loss = parse_worker_loss(on_worker_loss_);
    s.options = tcp_.options();
    s.ranks = s.options.world_size;
    s.rank = s.options.rank;
    return s;
  }

 private:
  flotilla::transport::TcpFlags tcp_;
  const std::string& on_worker_loss_;
};

}  // namespace example
