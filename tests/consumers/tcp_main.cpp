// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The TCP consumer of tests/consumers/find_package: flotilla::tcp, found with
// find_package(flotilla CONFIG REQUIRED COMPONENTS tcp), which finds Boost. A job of one rank (no
// FLOTILLA_* variables): a message to itself, then the orderly shutdown.
#include <flotilla/transport/tcp.hpp>

#include <cstddef>
#include <cstdio>
#include <vector>

int main() {
  namespace tr = flotilla::transport;
  std::vector<std::byte> out(16, std::byte{42}), in(16);
  tr::Tcp::run(tr::TcpOptions{}, 1, [&](tr::TcpEndpoint& e) { e.sendrecv(0, 7, out, 0, in); });
  if (in != out) return 1;
  std::puts("tcp: a job of one rank ran");
  return 0;
}
