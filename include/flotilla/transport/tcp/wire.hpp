// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_TCP_WIRE_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_TCP_WIRE_HPP_INCLUDED
// The TCP transport's wire format: what one rank writes to another's socket. Public, because tools
// and tests that speak to a rank (a fake peer, a packet dump) need it, and because it is a
// contract: ranks of one job must agree on it byte for byte.
//
// A connection carries frames. Every frame is a fixed 48-byte header, then `payload_length` bytes
// of payload, then, when flags bit 1 is set, a 16-byte tag. All integers are little-endian
// whatever the host's byte order.
//
//   offset size field
//        0    4 magic           'F' 'L' 'O' 'T'
//        4    2 version         protocol_version; a peer of another version is refused
//        6    1 type            FrameType
//        7    1 flags           bit 0: payload_crc is set and must match;
//                               bit 1: a 16-byte frame tag follows the payload
//        8    4 tag             the message's tag (data), the round (barrier), else 0
//       12    4 aux             the barrier's epoch; the rank that failed first (abort); else 0
//       16    8 sequence        frames sent on this connection in this direction before this one,
//                               heartbeats not counted
//       24    8 fingerprint     the collective this message belongs to (transport/operation.hpp),
//                               0 when the sender declared none
//       32    8 payload_length  bytes after the header
//       40    4 payload_crc     CRC-32C of the payload when flags bit 0 is set, else 0
//       44    4 header_crc      CRC-32 of bytes 0..43
//
// Why these fields: the header CRC makes a corrupted or foreign byte stream fail at its first
// header rather than be read as a length (and allocated); the sequence number catches a lost or
// repeated frame (a bug in a sender, as TCP itself does neither); the fingerprint lets the receiver
// check that both sides of a message are in the same collective call; the payload CRC, that the
// payload arrived intact. Control frames always carry a payload CRC; data frames as the sender's
// TcpOptions::checksum_data says (by default, those on connections to other hosts).
//
// The frame tag (flags bit 1) is AES-256-GMAC (crypto.hpp) over the 48 header bytes and the
// payload, with the sequence number as the nonce, under the key of the connection and direction
// (frame_keys(): derived from the shared secret and both hellos, so fresh for every connection).
// It is sent on every frame after the handshake but heartbeats when TcpOptions::frame_mac says so
// (by default on connections to other hosts of a job with a secret), and then required: a frame
// without it, or whose tag does not match, drops the connection. A CRC catches a corrupted byte;
// the tag also catches one changed on purpose, since only the ends know the key. A tagged frame
// leaves payload_crc 0: the tag covers more. Heartbeats carry nothing and are not tagged (a forged
// one can only make a dead peer look alive for a while, no longer than its connection stays up).
//
// A connection starts with a handshake (the side that connected is the client):
//   client -> server  hello   (its Hello, with a fresh random nonce)
//   server -> client  hello   (its Hello, with a nonce of its own), or refuse
//   server -> client  auth    HMAC-SHA256(secret, "flotilla server" || both hello payloads)
//   client -> server  auth    HMAC-SHA256(secret, "flotilla client" || both hello payloads)
// The auth frames are sent only when the job has a shared secret (Hello::auth says so; a peer that
// disagrees is refused). Each side proves that it knows the secret without sending it, over both
// nonces, so a recorded handshake cannot be replayed; the proofs cover the whole hellos, so their
// fields (rank, job id, listening address) cannot be altered on the way.
// Magic, version and type are at fixed offsets in every version, and a refusal is read whatever its
// version, so that a rank can always say why it refused a peer.
//
// After the handshake, each side sends a heartbeat frame (no payload) every heartbeat interval on
// every connection, so that a peer can tell a stalled rank from a busy one.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/crc32.hpp"
#include "flotilla/core/crc32c.hpp"
#include "flotilla/transport/tcp/crypto.hpp"

namespace flotilla::transport::tcp::wire {

inline constexpr std::size_t header_size = 48;
inline constexpr std::uint32_t magic = 0x544F4C46u;  // "FLOT" as little-endian bytes
/// 1: the first; 2: payload CRC, operation fingerprint, heartbeats, authentication; 3: the
/// shared-memory setup that ends every rendezvous of more than one rank (TcpOptions::shared_memory);
/// 4: the payload CRC is CRC-32C (core/crc32c.hpp: in hardware, four times the speed of CRC-32);
/// 5: frame tags (AES-256-GMAC) on connections that leave the host.
inline constexpr std::uint16_t protocol_version = 5;

/// The largest payload of a frame other than data (hello, table, refusal, abort). A header that
/// announces more is refused before anything is allocated.
inline constexpr std::uint64_t max_control_payload = 1u << 20;

enum class FrameType : std::uint8_t {
  hello = 1,    // payload: Hello
  refuse = 2,   // payload: why (UTF-8 text); the sender closes the connection after it
  table = 3,    // payload: Table, from rank 0 (the coordinator) to each rank at rendezvous
  data = 4,     // payload: the message
  barrier = 5,  // no payload; tag = round, aux = epoch
  goodbye = 6,  // no payload; the last frame the sender writes on this connection
  abort = 7,    // payload: why the job failed (UTF-8 text); aux: the rank that failed first. The
                // sender closes after it.
  heartbeat = 8,  // no payload; not counted in the sequence (sent from a thread of its own)
  auth = 9,       // payload: the sender's proof that it knows the secret (32 bytes)
};

namespace header_flags {
/// payload_crc holds the CRC-32C of the payload, and the receiver checks it.
inline constexpr std::uint8_t payload_crc = 1u << 0;
/// A frame tag (FrameMac::tag_size bytes) follows the payload, and the receiver checks it.
inline constexpr std::uint8_t frame_tag = 1u << 1;
}  // namespace header_flags

inline constexpr std::string_view type_name(FrameType t) noexcept {
  switch (t) {
    case FrameType::hello: return "hello";
    case FrameType::refuse: return "refuse";
    case FrameType::table: return "table";
    case FrameType::data: return "data";
    case FrameType::barrier: return "barrier";
    case FrameType::goodbye: return "goodbye";
    case FrameType::abort: return "abort";
    case FrameType::heartbeat: return "heartbeat";
    case FrameType::auth: return "auth";
  }
  return "unknown";
}

struct Header {
  std::uint16_t version = protocol_version;
  FrameType type = FrameType::data;
  std::uint8_t flags = 0;
  std::uint32_t tag = 0;
  std::uint32_t aux = 0;
  std::uint64_t sequence = 0;
  std::uint64_t fingerprint = 0;
  std::uint64_t payload_length = 0;
  std::uint32_t payload_crc = 0;

  friend bool operator==(const Header&, const Header&) = default;
};

using HeaderBytes = std::array<std::byte, header_size>;

}  // namespace flotilla::transport::tcp::wire

namespace flotilla::transport::tcp::detail {

template <class T>
inline void wire_put(std::byte* p, T v) noexcept {
  for (std::size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<std::byte>(static_cast<std::uint64_t>(v) >> (8 * i));
}
template <class T>
inline T wire_get(const std::byte* p) noexcept {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return static_cast<T>(v);
}

}  // namespace flotilla::transport::tcp::detail

namespace flotilla::transport::tcp::wire {

/// Writes `h` into `out`, with magic and header CRC.
inline void encode(const Header& h, std::span<std::byte, header_size> out) noexcept {
  std::byte* p = out.data();
  detail::wire_put<std::uint32_t>(p + 0, magic);
  detail::wire_put<std::uint16_t>(p + 4, h.version);
  detail::wire_put<std::uint8_t>(p + 6, static_cast<std::uint8_t>(h.type));
  detail::wire_put<std::uint8_t>(p + 7, h.flags);
  detail::wire_put<std::uint32_t>(p + 8, h.tag);
  detail::wire_put<std::uint32_t>(p + 12, h.aux);
  detail::wire_put<std::uint64_t>(p + 16, h.sequence);
  detail::wire_put<std::uint64_t>(p + 24, h.fingerprint);
  detail::wire_put<std::uint64_t>(p + 32, h.payload_length);
  detail::wire_put<std::uint32_t>(p + 40, h.payload_crc);
  detail::wire_put<std::uint32_t>(p + 44, crc32(std::span<const std::byte>(p, 44)));
}

inline HeaderBytes encode(const Header& h) noexcept {
  HeaderBytes b;
  encode(h, b);
  return b;
}

/// A header as read, with what is wrong with it, if anything. The version is not judged here: the
/// hello exchange reports a version mismatch with both numbers, other frames as an error.
struct Decoded {
  Header header;
  std::uint32_t magic = 0;
  std::uint32_t stored_crc = 0;
  std::uint32_t computed_crc = 0;
  bool magic_ok() const noexcept { return magic == wire::magic; }
  bool crc_ok() const noexcept { return stored_crc == computed_crc; }
  bool type_known() const noexcept {
    const auto t = static_cast<std::uint8_t>(header.type);
    return t >= static_cast<std::uint8_t>(FrameType::hello) && t <= static_cast<std::uint8_t>(FrameType::auth);
  }
  /// Empty when magic, CRC and type are good; else what is wrong, for an error message.
  std::string problem() const {
    auto hex = [](std::uint32_t v) {
      static constexpr char digits[] = "0123456789abcdef";
      std::string s = "0x";
      for (int i = 28; i >= 0; i -= 4) s += digits[(v >> i) & 0xFu];
      return s;
    };
    if (!magic_ok()) return "bad magic number " + hex(magic) + " (expected " + hex(wire::magic) + "): not a flotilla peer";
    if (!crc_ok()) return "bad header CRC " + hex(stored_crc) + " (computed " + hex(computed_crc) + ")";
    if (!type_known()) return "unknown frame type " + std::to_string(static_cast<unsigned>(header.type));
    return {};
  }
};

inline Decoded decode(std::span<const std::byte, header_size> in) noexcept {
  const std::byte* p = in.data();
  Decoded d;
  d.magic = detail::wire_get<std::uint32_t>(p + 0);
  d.header.version = detail::wire_get<std::uint16_t>(p + 4);
  d.header.type = static_cast<FrameType>(detail::wire_get<std::uint8_t>(p + 6));
  d.header.flags = detail::wire_get<std::uint8_t>(p + 7);
  d.header.tag = detail::wire_get<std::uint32_t>(p + 8);
  d.header.aux = detail::wire_get<std::uint32_t>(p + 12);
  d.header.sequence = detail::wire_get<std::uint64_t>(p + 16);
  d.header.fingerprint = detail::wire_get<std::uint64_t>(p + 24);
  d.header.payload_length = detail::wire_get<std::uint64_t>(p + 32);
  d.header.payload_crc = detail::wire_get<std::uint32_t>(p + 40);
  d.stored_crc = detail::wire_get<std::uint32_t>(p + 44);
  d.computed_crc = crc32(std::span<const std::byte>(p, 44));
  return d;
}

/// Sets the payload CRC of `h` (and its flag) for `payload`.
inline void seal_payload(Header& h, std::span<const std::byte> payload) noexcept {
  h.flags |= header_flags::payload_crc;
  h.payload_crc = crc32c(payload);
}

/// Empty when `payload` matches the CRC `h` announces (or `h` announces none); else what is wrong.
inline std::string payload_problem(const Header& h, std::span<const std::byte> payload) {
  if ((h.flags & header_flags::payload_crc) == 0) return {};
  const std::uint32_t c = crc32c(payload);
  if (c == h.payload_crc) return {};
  return "bad payload CRC (the " + std::to_string(payload.size()) + "-byte payload of a " +
         std::string(type_name(h.type)) + " frame was corrupted on the way)";
}

/// Everything a receiver checks in a header before it reads the payload: magic, header CRC, type,
/// version, and the payload length against `max_payload` (so that nothing is allocated for a
/// length no frame of that kind may have). Empty when the header may be acted on.
inline std::string header_problem(const Decoded& d, std::uint64_t max_payload) {
  if (auto p = d.problem(); !p.empty()) return p;
  const Header& h = d.header;
  if (h.version != protocol_version)
    return "protocol version " + std::to_string(h.version) + ", this side speaks version " +
           std::to_string(protocol_version);
  const bool empty_kind = h.type == FrameType::barrier || h.type == FrameType::goodbye || h.type == FrameType::heartbeat;
  if (empty_kind && h.payload_length != 0)
    return "a " + std::string(type_name(h.type)) + " frame with a " + std::to_string(h.payload_length) + "-byte payload";
  if (h.type == FrameType::auth && h.payload_length != Digest{}.size())
    return "an auth frame of " + std::to_string(h.payload_length) + " bytes (a proof has 32)";
  const std::uint64_t limit = h.type == FrameType::data ? max_payload : max_control_payload;
  if (h.payload_length > limit)
    return "a " + std::string(type_name(h.type)) + " frame of " + std::to_string(h.payload_length) + " bytes (at most " +
           std::to_string(limit) + ")";
  return {};
}

// ---- control payloads ----------------------------------------------------------------------

/// A rank introducing itself. `listen_host`/`listen_port`: where it accepts connections from the
/// ranks below it (sent to the coordinator at rendezvous; empty/0 on mesh connections).
/// `job_id`: chosen by the coordinator and handed out in the table, so that a connection from
/// another job that happens to reach this port is refused (0 while registering).
/// `auth`: 1 when the sender has a shared secret and will prove it (auth frames follow), else 0.
/// `nonce`: random, fresh for every connection (the challenge the other side's proof must cover).
struct Hello {
  std::uint32_t world_size = 0;
  std::uint32_t rank = 0;
  std::uint64_t job_id = 0;
  std::uint16_t listen_port = 0;
  std::string listen_host;
  std::uint8_t auth = 0;
  std::array<std::uint8_t, 32> nonce{};

  friend bool operator==(const Hello&, const Hello&) = default;
};

/// Where every rank listens, from the coordinator. Entry 0 is the coordinator itself.
struct Table {
  struct Entry {
    std::string host;
    std::uint16_t port = 0;
    friend bool operator==(const Entry&, const Entry&) = default;
  };
  std::uint64_t job_id = 0;
  std::vector<Entry> entries;

  friend bool operator==(const Table&, const Table&) = default;
};

}  // namespace flotilla::transport::tcp::wire

namespace flotilla::transport::tcp::detail {

struct WireWriter {
  std::vector<std::byte> out;
  template <class T>
  void num(T v) {
    out.resize(out.size() + sizeof(T));
    wire_put<T>(out.data() + out.size() - sizeof(T), v);
  }
  void text(std::string_view s) {  // 16-bit length, then the bytes (host names are short)
    num<std::uint16_t>(static_cast<std::uint16_t>(s.size()));
    for (char c : s) out.push_back(static_cast<std::byte>(c));
  }
};

/// Whether `s` can stand for a host on the wire: empty (none given), or at most 255 bytes of
/// printable ASCII other than the space. That takes host names (RFC 1123, and others as punycode),
/// IPv4 and IPv6 literals (with a zone: "fe80::1%eth0"). Anything else, a control character say,
/// is no host: the hello or table that carries it is malformed, refused as such rather than passed
/// on to name resolution.
inline bool wire_host_valid(std::string_view s) noexcept {
  if (s.size() > 255) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u > 0x20 && u < 0x7f;
  });
}

struct WireReader {
  std::span<const std::byte> in;
  bool ok = true;
  template <class T>
  T num() {
    if (in.size() < sizeof(T)) {
      ok = false;
      return T{};
    }
    const T v = wire_get<T>(in.data());
    in = in.subspan(sizeof(T));
    return v;
  }
  std::string text() {
    const auto n = num<std::uint16_t>();
    if (!ok || in.size() < n) {
      ok = false;
      return {};
    }
    std::string s(reinterpret_cast<const char*>(in.data()), n);
    in = in.subspan(n);
    return s;
  }
};

}  // namespace flotilla::transport::tcp::detail

namespace flotilla::transport::tcp::wire {

inline std::vector<std::byte> encode_hello(const Hello& h) {
  detail::WireWriter w;
  w.num<std::uint32_t>(h.world_size);
  w.num<std::uint32_t>(h.rank);
  w.num<std::uint64_t>(h.job_id);
  w.num<std::uint16_t>(h.listen_port);
  w.text(h.listen_host.substr(0, 0xFFFF));
  w.num<std::uint8_t>(h.auth);
  for (const auto b : h.nonce) w.num<std::uint8_t>(b);
  return std::move(w.out);
}

/// Empty when `payload` is not exactly one well-formed Hello (its host included: wire_host_valid).
inline std::optional<Hello> decode_hello(std::span<const std::byte> payload) {
  detail::WireReader r{payload};
  Hello h;
  h.world_size = r.num<std::uint32_t>();
  h.rank = r.num<std::uint32_t>();
  h.job_id = r.num<std::uint64_t>();
  h.listen_port = r.num<std::uint16_t>();
  h.listen_host = r.text();
  h.auth = r.num<std::uint8_t>();
  for (auto& b : h.nonce) b = r.num<std::uint8_t>();
  if (!r.ok || !r.in.empty() || h.auth > 1 || !detail::wire_host_valid(h.listen_host)) return std::nullopt;
  return h;
}

inline std::vector<std::byte> encode_table(const Table& t) {
  detail::WireWriter w;
  w.num<std::uint64_t>(t.job_id);
  w.num<std::uint32_t>(static_cast<std::uint32_t>(t.entries.size()));
  for (const auto& e : t.entries) {
    w.num<std::uint16_t>(e.port);
    w.text(e.host.substr(0, 0xFFFF));
  }
  return std::move(w.out);
}

/// Empty when `payload` is not exactly one well-formed Table (every host: wire_host_valid).
inline std::optional<Table> decode_table(std::span<const std::byte> payload) {
  detail::WireReader r{payload};
  Table t;
  t.job_id = r.num<std::uint64_t>();
  const auto n = r.num<std::uint32_t>();
  // Each entry takes at least 4 bytes: a count beyond that is malformed, and is refused before
  // anything is reserved for it.
  if (!r.ok || n > r.in.size() / 4) return std::nullopt;
  t.entries.reserve(n);
  for (std::uint32_t i = 0; i < n && r.ok; ++i) {
    Table::Entry e;
    e.port = r.num<std::uint16_t>();
    e.host = r.text();
    if (!detail::wire_host_valid(e.host)) return std::nullopt;
    t.entries.push_back(std::move(e));
  }
  if (!r.ok || !r.in.empty()) return std::nullopt;
  return t;
}

enum class Role : std::uint8_t { client, server };

}  // namespace flotilla::transport::tcp::wire

namespace flotilla::transport::tcp::detail {
/// HMAC-SHA-256 with `secret` over `label` and both hello payloads as sent (the client's first),
/// each with its length, so that no field of either can be changed and no pair of hellos is taken
/// for another.
inline Digest over_hellos(std::string_view secret, std::string_view label, std::span<const std::byte> client_hello,
                          std::span<const std::byte> server_hello) {
  std::array<std::byte, 8> n1{}, n2{};
  wire_put<std::uint64_t>(n1.data(), client_hello.size());
  wire_put<std::uint64_t>(n2.data(), server_hello.size());
  return hmac_sha256(secret, {std::as_bytes(std::span<const char>(label.data(), label.size())), n1, client_hello, n2,
                              server_hello});
}
}  // namespace flotilla::transport::tcp::detail

namespace flotilla::transport::tcp::wire {

/// The proof that the sender of an auth frame in `role` knows `secret`, over both hellos.
inline Digest auth_proof(std::string_view secret, Role role, std::span<const std::byte> client_hello,
                         std::span<const std::byte> server_hello) {
  return detail::over_hellos(secret, role == Role::client ? "flotilla client" : "flotilla server", client_hello,
                             server_hello);
}

/// Whether `proof` (an auth frame's payload) is what `expected` says, in constant time.
inline bool proof_matches(std::span<const std::byte> proof, const Digest& expected) noexcept {
  return constant_time_equal(proof, std::as_bytes(std::span<const std::uint8_t>(expected)));
}

/// The keys of a connection's frame tags, one per direction, as the side in `role` uses them.
/// Derived like the proofs, under labels of their own, so that a proof reveals nothing of a key.
struct FrameKeys {
  Digest send{}, receive{};
};
inline FrameKeys frame_keys(std::string_view secret, Role role, std::span<const std::byte> client_hello,
                            std::span<const std::byte> server_hello) {
  const Digest from_client = detail::over_hellos(secret, "flotilla frames from client", client_hello, server_hello);
  const Digest from_server = detail::over_hellos(secret, "flotilla frames from server", client_hello, server_hello);
  return role == Role::client ? FrameKeys{from_client, from_server} : FrameKeys{from_server, from_client};
}

}  // namespace flotilla::transport::tcp::wire
#endif  // FLOTILLA_TRANSPORT_TCP_WIRE_HPP_INCLUDED
