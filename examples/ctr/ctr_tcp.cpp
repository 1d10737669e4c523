// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Click-through prediction with one process per rank over TCP: ranks [0, W) are workers, the next
// S the parameter servers that hold the embedding rows. On one machine, under the launcher:
//
//   flotilla-ctr-generate --lines 2000000 --out train.tsv --test-lines 200000 --test-out test.tsv
//   flotilla-launch -n 4 -- ./ctr_tcp --workers 2 --servers 2 --train train.tsv --test test.tsv
//
// On several machines, one process per rank with --rank, --world-size, --coordinator, --bind and
// --secret-file (docs/transports.md). --help lists every flag.
#include <flotilla/transport/tcp.hpp>

#include "ctr_common.hpp"

namespace example {

struct TcpFlags {
  using backend = flotilla::transport::Tcp;
  static constexpr bool generates = false;
  explicit TcpFlags(flotilla::cli::Flags& flags) : tcp(flags) {}
  backend::options options() const { return tcp.options(); }
  std::size_t rank() const { return tcp.options().rank; }
  void check(std::size_t workers, std::size_t servers) const {
    const auto o = tcp.options();
    if (o.world_size != workers + servers)
      throw flotilla::ConfigError("--workers " + std::to_string(workers) + " and --servers " + std::to_string(servers) +
                                  " need " + std::to_string(workers + servers) + " ranks; the job has " +
                                  std::to_string(o.world_size) + " (flotilla-launch -n)");
  }
  flotilla::transport::TcpFlags tcp;
};

}  // namespace example

int main(int argc, char** argv) try {
  return example::run<example::TcpFlags>(argc, argv, "ctr_tcp");
} catch (const std::exception& e) {
  std::fprintf(stderr, "ctr_tcp: %s\n", e.what());
  return 1;
}
