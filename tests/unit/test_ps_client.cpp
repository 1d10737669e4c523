// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The worker's side of the parameter-server protocol with its traffic already encoded, as a GPU
// engine hands it over (topology/detail/parameter_server.hpp: push_encoded, pull_encoded): the same bytes
// on the wire as the host's encode, each shard's codes taken from the right place, and codes that
// do not cover a shard refused with an error naming it. Over the in-process transport, with the
// servers' side written out here.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "flotilla/codec/fp16.hpp"
#include "flotilla/topology/detail/parameter_server.hpp"
#include "flotilla/transport/in_process.hpp"

namespace unit_ps_client {

using namespace flotilla;
using transport::InProcess;

TEST_CASE("ps client: pre-encoded pushes and pulls carry the bytes of the host's encoding, shard by shard") {
  constexpr std::size_t values = 11, servers = 2;  // shards [0, 6) and [6, 11): odd sizes
  const auto shards = detail::balanced_shards(values, servers);
  std::vector<float> gradients(values), parameters(values);
  for (std::size_t i = 0; i < values; ++i) {
    gradients[i] = 0.1f * static_cast<float>(i) - 0.37f;
    parameters[i] = 1.0f / static_cast<float>(i + 3);
  }
  std::vector<std::byte> codes(codec::Fp16::encoded_size(values));
  codec::Fp16::encode(std::span<const float>(gradients), codes);

  std::vector<std::string> failures(1 + servers);  // one slot per rank: no sharing between threads
  std::vector<float> pulled(values, -1.0f);
  std::vector<std::size_t> pulled_begins;
  InProcess::run({}, 1 + servers, [&](InProcess::endpoint& e) {
    if (e.rank() > 0) {  // server s = rank - 1: two pushes, equal; then one reply with its parameters
      const detail::Range r = shards[e.rank() - 1];
      const std::size_t size = detail::PsHeader::size + codec::Fp16::encoded_size(r.size());
      std::vector<std::byte> encoded_here(size), encoded_before(size), reply(size);
      e.recv(0, detail::protocol_tags::ps_push, encoded_here);
      e.recv(0, detail::protocol_tags::ps_push, encoded_before);
      if (encoded_here != encoded_before) failures[e.rank()] = "shard " + std::to_string(e.rank() - 1) + ": pushes differ";
      detail::PsHeader{detail::PsHeader::reply, 0, 7, 0, 0}.write(reply.data());
      codec::Fp16::encode(std::span<const float>(parameters).subspan(r.begin, r.size()),
                          std::span<std::byte>(reply).subspan(detail::PsHeader::size));
      e.send(0, detail::protocol_tags::ps_reply, reply);
      return;
    }
    detail::ParameterServerClient<float, codec::Fp16> client(shards, 1);
    for (std::size_t s = 0; s < servers; ++s) {
      client.push(e, s, gradients);
      client.push_encoded(e, s, codes);
    }
    for (std::size_t s = 0; s < servers; ++s)
      client.pull_encoded(e, s, [&](std::size_t begin, std::span<const std::byte> bytes) {
        pulled_begins.push_back(begin);
        codec::Fp16::decode(bytes, std::span<float>(pulled).subspan(begin, bytes.size() / 2));
      });
    // Codes of a shorter buffer do not reach the second shard's end.
    CHECK_THROWS_WITH_AS(client.push_encoded(e, 1, std::span<const std::byte>(codes).first(codes.size() - 2)),
                         doctest::Contains("shard 1: its codes end at byte 22 of 20"), ShapeError);
  });
  for (const auto& f : failures) CHECK_MESSAGE(f.empty(), f);
  CHECK(pulled_begins == std::vector<std::size_t>{0, 6});
  std::vector<float> expected(values);
  std::vector<std::byte> round(codes.size());
  codec::Fp16::encode(std::span<const float>(parameters), round);
  codec::Fp16::decode(round, std::span<float>(expected));
  CHECK(pulled == expected);
}

}  // namespace unit_ps_client
