// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// libFuzzer harness for the TCP transport's frame decoder (transport/tcp/wire.hpp): the input is
// read as a byte stream the way a rank reads a connection, frame after frame: a 48-byte header,
// decoded and judged (magic, header CRC, type, version, the payload length against the bound for
// its kind) before anything is allocated for the payload; then the payload, checked against its
// CRC and parsed by its kind (hello, table, auth proof, operation fingerprint). Nothing in it may
// crash, read out of bounds or allocate more than the bound: run under -fsanitize=address,undefined
// with a malloc limit.
//
//   clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -Iinclude \
//       tests/fuzz/frame_decoder.cpp -o /tmp/fd && /tmp/fd -max_total_time=60 tests/fuzz/corpus/frame_decoder
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "flotilla/transport/operation.hpp"
#include "flotilla/transport/tcp/wire.hpp"

namespace {

namespace wire = flotilla::transport::tcp::wire;

/// The bound a receiver puts on data frames without a posted receive (TcpOptions::max_message_bytes
/// is 4 GiB by default; a fuzzing run uses a smaller one, so that the check is exercised).
constexpr std::uint64_t max_data = 1u << 16;

void touch(const std::string& s) {
  // Keeps the decoded text alive as an observable result, so that nothing is optimised away. Any
  // text is a valid result here (the fuzzer decodes arbitrary text out of a hello), so nothing
  // about it may stop the run.
  static volatile std::size_t sink = 0;
  sink = sink + s.size() + (s.empty() ? 0u : static_cast<unsigned char>(s.front()));
}

}  // namespace

/// The first byte of the input picks the mode: odd, the CRCs of every frame are recomputed before
/// decoding (as a peer that knows the format would write them), so that mutations reach the payload
/// parsers instead of stopping at a CRC mismatch; even, the bytes are decoded as they are.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool fix_crcs = (data[0] & 1) != 0;
  std::vector<std::byte> copy(reinterpret_cast<const std::byte*>(data) + 1, reinterpret_cast<const std::byte*>(data) + size);
  std::span<std::byte> in(copy);
  while (in.size() >= wire::header_size) {
    if (fix_crcs) {
      auto d = wire::decode(in.first<wire::header_size>());
      const std::uint64_t n = std::min<std::uint64_t>(d.header.payload_length, in.size() - wire::header_size);
      if ((d.header.flags & wire::header_flags::payload_crc) != 0)
        wire::seal_payload(d.header, in.subspan(wire::header_size, static_cast<std::size_t>(n)));
      const std::uint32_t magic = flotilla::transport::tcp::detail::wire_get<std::uint32_t>(in.data());
      wire::encode(d.header, in.first<wire::header_size>());
      flotilla::transport::tcp::detail::wire_put<std::uint32_t>(in.data(), magic);  // a wrong magic stays wrong
    }
    const auto d = wire::decode(std::span<const std::byte, wire::header_size>(in.first<wire::header_size>()));
    in = in.subspan(wire::header_size);
    const std::string problem = wire::header_problem(d, max_data);
    if (!problem.empty()) {  // the receiver drops the connection here, with this message
      touch(problem);
      return 0;
    }
    const wire::Header& h = d.header;
    if (h.payload_length > in.size()) return 0;  // truncated: the receiver waits, then times out
    // What the receiver allocates: the header said how much, and it was within the bound.
    std::vector<std::byte> payload(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(h.payload_length));
    in = in.subspan(static_cast<std::size_t>(h.payload_length));
    if (const auto bad = wire::payload_problem(h, payload); !bad.empty()) {
      touch(bad);
      return 0;
    }
    switch (h.type) {
      case wire::FrameType::hello:
        if (const auto hello = wire::decode_hello(payload)) {
          touch(hello->listen_host);
          if (wire::decode_hello(wire::encode_hello(*hello)) != hello) std::abort();  // round trip
        }
        break;
      case wire::FrameType::table:
        if (const auto table = wire::decode_table(payload)) {
          for (const auto& e : table->entries) touch(e.host);
          if (wire::decode_table(wire::encode_table(*table)) != table) std::abort();
        }
        break;
      case wire::FrameType::auth: {
        const auto proof = wire::auth_proof("secret", wire::Role::client, payload, payload);
        if (wire::proof_matches(payload, proof) != (std::span<const std::byte>(payload).size() == 32 &&
                                                    std::equal(payload.begin(), payload.end(),
                                                               reinterpret_cast<const std::byte*>(proof.data()))))
          std::abort();
        break;
      }
      case wire::FrameType::data:
        touch(flotilla::transport::Operation::from_fingerprint(h.fingerprint).describe());
        break;
      default:
        touch(std::string(wire::type_name(h.type)));
        break;
    }
  }
  return 0;
}
