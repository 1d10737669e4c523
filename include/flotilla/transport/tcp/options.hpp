// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_TCP_OPTIONS_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_TCP_OPTIONS_HPP_INCLUDED
// The settings of a TCP job (Options), and how they are read from the environment: each one has an
// environment variable, and the same texts arrive from command-line flags (flags.hpp). Every
// value is checked here, before any socket is opened, so that a typo fails with the variable's
// name rather than as a hang or a refused connection.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/transport/launcher.hpp"
#include "flotilla/transport/tcp/shared_memory.hpp"
#include "flotilla/transport/tcp/socket.hpp"
#include "flotilla/transport/tcp/wire.hpp"

namespace flotilla::transport::tcp {


/// Whether a job's ranks sum through shared memory when they are on one host
/// (TcpOptions::shared_memory).
enum class SharedMemory { off, automatic, on };

/// Which data frames carry a payload CRC (Options::checksum_data).
enum class DataChecksums {
  off,          ///< none (control frames still do)
  other_hosts,  ///< those on connections to other hosts (the default)
  all,          ///< every one
};

/// Which connections' frames carry a frame tag, AES-256-GMAC under a key of the connection
/// (Options::frame_mac; wire.hpp).
enum class FrameMacs {
  off,          ///< none: frames carry CRCs only (Options::checksum_data)
  other_hosts,  ///< those to other hosts, in a job with a shared secret (the default)
  all,          ///< every connection, in a job with a shared secret
};

/// The settings of a TCP job. Each one can come from an environment variable (from_environment())
/// or a command-line flag (TcpFlags); flotilla-launch sets the first three for every rank.
struct Options {
  /// This process's rank, 0 to world_size - 1. FLOTILLA_RANK, --rank.
  std::size_t rank = 0;
  /// How many processes the job has. 1 (the default) is this process alone, with no network.
  /// FLOTILLA_WORLD_SIZE, --world-size.
  std::size_t world_size = 1;
  /// host:port where rank 0 listens for the other ranks to register; required when world_size > 1.
  /// FLOTILLA_COORDINATOR, --coordinator.
  std::string coordinator;
  /// The address this rank listens on for its peers. Loopback by default, so that a job is
  /// reachable from another machine only when asked: an interface's address, or 0.0.0.0 for every
  /// interface (peers are then told the address this rank reaches the coordinator from).
  /// FLOTILLA_BIND, --bind.
  std::string bind = "127.0.0.1";
  /// The longest any wait may last: send, recv, sendrecv, recv_any, barrier and shutdown.
  /// FLOTILLA_TIMEOUT_MS, --timeout-ms.
  std::chrono::milliseconds timeout{30'000};
  /// How long the rendezvous may take: connecting to the coordinator (retried while it is not
  /// listening yet), waiting for every rank to register, connecting to the peers.
  /// FLOTILLA_CONNECT_TIMEOUT_MS, --connect-timeout-ms.
  std::chrono::milliseconds connect_timeout{30'000};
  /// SO_SNDBUF and SO_RCVBUF of every connection, in bytes; 0 leaves them to the kernel, whose
  /// automatic tuning (Linux: up to net.ipv4.tcp_rmem/tcp_wmem's maximum) is usually best.
  /// FLOTILLA_SOCKET_BUFFER, --socket-buffer.
  std::size_t socket_buffer_bytes = 0;
  /// TCP_NOTSENT_LOWAT of every connection: a send returns once at most this many of its bytes
  /// wait unsent in the kernel, rather than once the socket buffer has taken them all. Sends to
  /// several peers then leave one after the other (a parameter server's replies: the first worker
  /// answered computes its next step while the others are answered) instead of side by side and
  /// ending together. 0 leaves it to the kernel (net.ipv4.tcp_notsent_lowat). docs/transports.md,
  /// "Sends one after the other". FLOTILLA_UNSENT_LIMIT, --unsent-limit.
  std::size_t unsent_limit_bytes = 128 * 1024;
  /// Whether a send reads what other peers send meanwhile (a frame a peer, kept until it is
  /// received), rather than leaving it in the kernel until a receive asks for it: their sends then
  /// go on instead of stopping at this rank's receive window. FLOTILLA_READ_WHILE_SENDING,
  /// --read-while-sending: 0 or 1.
  bool read_while_sending = true;
  /// Whether float sums (the endpoint's own allreduce, NativeAllreduce: what
  /// collective::ring_allreduce and the trainer's buckets use) go through a shared-memory segment
  /// instead of the sockets (transport/tcp/host_allreduce.hpp). `automatic` (the default): when
  /// at least two ranks share a host (`host`) and the ranks of every such host can map a segment:
  /// one segment when all are on one host, else one a host and a ring of the hosts' leaders over
  /// the sockets between them; else the sockets, with one line to `log` when ranks on one host
  /// could not map a segment. `on`: required; a rank that cannot map it fails the rendezvous on
  /// every rank, naming itself and why. `off`: the sockets always. Every rank must agree: a rank
  /// with `off` turns it off for the job, and `on` against `off` fails the rendezvous. Bytes summed
  /// this way do not appear in counters(): they never go on the wire. FLOTILLA_SHARED_MEMORY,
  /// --shared-memory: `auto`, `on`, `off` (or 0), or a number of bytes (`on`, with that
  /// shared_memory_bytes).
  SharedMemory shared_memory = SharedMemory::automatic;
  /// The bytes the shared-memory path sums per step: larger sums go through it in pieces of this
  /// size (two ranks: of at most 384 KiB). The segment holds 2 x ranks x this many bytes of
  /// /dev/shm, reserved when it is made. The default keeps pieces in the caches
  /// (docs/benchmarks.md, "Shared-memory allreduce"). Rank 0's value is the job's, unless a rank
  /// with `on` gives another.
  std::size_t shared_memory_bytes = std::size_t{1} << 20;
  /// Which host this rank is on, for the shared-memory sums: ranks with the same name sum through
  /// one segment, and a job over several hosts sums hierarchically (host_allreduce.hpp). Empty
  /// (the default): detected, from the host name, the boot and the network namespace
  /// (host_identity.hpp). Set it where that is wrong: processes that share /dev/shm but not a
  /// network namespace may name one host. A word of at most 256 characters, no spaces.
  std::string host;
  /// The largest message accepted from a peer before a receive for it is posted (it must then be
  /// held in memory of its own). A header announcing more is a protocol error, refused before
  /// anything is allocated. Messages read into a posted receive are bounded by its buffer instead.
  std::uint64_t max_message_bytes = std::uint64_t{1} << 32;
  /// The shared secret that authenticates every connection (HMAC-SHA256 challenge-response in the
  /// handshake; the secret itself never goes on the wire). The same on every rank. Required when
  /// a rank listens on anything but loopback. FLOTILLA_SECRET, or FLOTILLA_SECRET_FILE /
  /// --secret-file: a file that only its owner may read (as ssh requires of a private key).
  std::string secret;
  /// How often each rank sends a heartbeat on every connection, from a thread of its own, also
  /// while its body computes. FLOTILLA_HEARTBEAT_MS, --heartbeat-ms.
  std::chrono::milliseconds heartbeat_interval{500};
  /// A peer that a rank waits on, and that has sent nothing, not even a heartbeat, for this many
  /// intervals is declared stalled (stopped, hung, or its machine unreachable): the wait fails
  /// naming it. A peer whose process dies is reported at once (its connection closes).
  std::uint32_t heartbeat_misses = 6;
  /// Which data frames carry a CRC-32C of their payload, checked on receipt (control frames always
  /// do): by default those on connections to other hosts, where the bytes cross NICs, switches and
  /// drivers whose faults TCP's 16-bit checksum can miss; not those between ranks of one host,
  /// which never leave its memory. The CRC runs in hardware at 8-10 GB/s (core/crc32c.hpp), still
  /// a pass over every message on both sides (docs/reliability.md has the measurement).
  /// FLOTILLA_CHECKSUM_DATA (auto, 0 or 1), --checksum-data.
  DataChecksums checksum_data = DataChecksums::other_hosts;
  /// Which connections' frames carry a frame tag: AES-256-GMAC over the header and the payload,
  /// under a key that the two ends derive from the shared secret and the handshake's nonces, so
  /// that a frame changed on the way, or one put in by anyone without the secret, drops the
  /// connection with an error naming the peer (a CRC, which anyone can recompute, only catches
  /// accidents). By default the connections to other hosts of a job with a secret (one is required
  /// off loopback): the tag costs a pass over each message on both sides, several GB/s with AES
  /// and carry-less multiply in hardware (docs/reliability.md has the measurement), and nothing
  /// leaves a host between its own ranks. A tagged frame needs no CRC. Without a secret there are
  /// no keys and no tags. A rank checks every tag it receives, and requires them where this
  /// setting says. FLOTILLA_FRAME_MAC (auto, 0 or 1), --frame-mac.
  FrameMacs frame_mac = FrameMacs::other_hosts;
  /// How long a wait keeps retrying its sockets before it sleeps in the reactor (epoll). A rank
  /// that sleeps must be woken when its message arrives: by the kernel, and on a virtual machine by
  /// the host resuming its virtual CPU, tens of microseconds per message, which is most of the time
  /// of a small allreduce. Retrying first, yielding the core between tries (so that a thread of
  /// this process with work, such as the trainer's backward pass, keeps it), takes the message as
  /// soon as it is there: small sums of 2 ranks over loopback were several times faster
  /// (docs/benchmarks.md, "Allreduce bus bandwidth: TCP transport, Open MPI, gloo"). The time
  /// counts from the last byte read or written, so a rank sleeps only once its sockets have been
  /// idle that long, never in the middle of a transfer that is moving. 0: sleep at once. The
  /// shared-memory path spins on its own (for up to 200 us). FLOTILLA_SPIN_US, --spin-us.
  std::chrono::microseconds spin{50};
  /// Where the transport reports what it drops (a connection that failed the handshake), one line
  /// each. Empty: a record to the log sink (core/log.hpp; stderr unless the program routes it).
  std::function<void(const std::string&)> log;
  /// Instead of the rendezvous, rejoin a running job as this rank after it was lost (its process
  /// died and was started again): host:port of each rank to reconnect to, as each printed it
  /// (TcpEndpoint::rejoin_address; the parameter servers of a job that goes on without lost
  /// workers). Each authenticates with the same handshake and refuses a rank that is still alive.
  /// FLOTILLA_REJOIN, --rejoin: comma-separated.
  std::vector<std::string> rejoin;

  /// The silence after which a waited-for peer is declared stalled.
  std::chrono::milliseconds stall_limit() const noexcept { return heartbeat_interval * heartbeat_misses; }

  /// The options from FLOTILLA_RANK, FLOTILLA_WORLD_SIZE, FLOTILLA_COORDINATOR, FLOTILLA_BIND,
  /// FLOTILLA_TIMEOUT_MS, FLOTILLA_CONNECT_TIMEOUT_MS, FLOTILLA_SOCKET_BUFFER, FLOTILLA_UNSENT_LIMIT,
  /// FLOTILLA_READ_WHILE_SENDING, FLOTILLA_SECRET,
  /// FLOTILLA_SECRET_FILE, FLOTILLA_HEARTBEAT_MS, FLOTILLA_CHECKSUM_DATA, FLOTILLA_FRAME_MAC, FLOTILLA_SHARED_MEMORY,
  /// FLOTILLA_SPIN_US and FLOTILLA_REJOIN (and FLOTILLA_LAUNCH_SECRET, flotilla-launch's secret for
  /// the job, when no secret is given); unset variables keep the defaults above. Without
  /// FLOTILLA_RANK and FLOTILLA_WORLD_SIZE, the rank, world size and coordinator of torchrun's,
  /// Open MPI's or Slurm's variables (transport/launcher.hpp). A value that cannot be used is a
  /// ConfigError naming the variable and the text (never the secret).
  static Options from_environment();
};

namespace detail {

/// One setting's text, when it was given, and how to name it in a message.
struct TcpSettingText {
  std::optional<std::string> text;
  std::string name;
};
struct TcpSettingTexts {
  TcpSettingText rank, world_size, coordinator, bind, timeout_ms, connect_timeout_ms, socket_buffer, unsent_limit, read_while_sending;
  TcpSettingText secret, secret_file, heartbeat_ms, checksum_data, frame_mac, shared_memory, spin_us, rejoin;
  /// FLOTILLA_LAUNCH_SECRET: flotilla-launch's secret for the job, used when no secret was given.
  TcpSettingText launch_secret;
  /// What another launcher's variables say (transport/launcher.hpp): the rank, world size and
  /// coordinator when neither the rank nor the world size was given.
  LaunchEnvironment launch;
};

/// The rank, world size and coordinator texts from another launcher's variables, where the job's
/// own were not given: a process that torchrun, mpirun or srun started as one of several joins
/// their job, or stops naming what it saw; it never trains alone.
inline void tcp_take_launcher(TcpSettingTexts& t) {
  const LaunchEnvironment& l = t.launch;
  if (t.rank.text || t.world_size.text || l.launcher == Launcher::none || l.launcher == Launcher::flotilla) return;
  const std::string from = std::string(launcher_name(l.launcher)) + "'s " + l.variables;
  t.rank = {std::to_string(l.rank), "the rank (" + from + ")"};
  t.world_size = {std::to_string(l.world_size), "the world size (" + from + ")"};
  if (t.coordinator.text || !l.several()) return;
  if (!l.coordinator)
    throw ConfigError("this process is rank " + std::to_string(l.rank) + " of " + std::to_string(l.world_size) + " (" + from +
                      "), but nothing says where rank 0 listens: set MASTER_ADDR and MASTER_PORT, or " + t.coordinator.name);
  t.coordinator = {*l.coordinator, "the coordinator (" + from + ")"};
}

/// The setting of environment variable `name`, named by it in messages.
inline TcpSettingText tcp_setting_from_env(const char* name) {
  TcpSettingText s;
  s.name = name;
  if (const char* v = std::getenv(name)) s.text = std::string(v);
  return s;
}

/// Whether a listening address keeps a job on this machine (an unauthenticated job is safe only there).
inline bool is_loopback_host(std::string_view host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.starts_with("127.");
}

/// The secret in `path`: refused when the file may be read by anyone but its owner, like ssh does
/// with a private key; a trailing newline is not part of it.
inline std::string read_secret_file(const std::string& path, const std::string& name) {
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw ConfigError(name + ": cannot open '" + path + "': " + errno_text(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw ConfigError(name + ": cannot stat '" + path + "': " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) throw ConfigError(name + ": '" + path + "' is not a regular file");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw ConfigError(name + ": '" + path + "' may be read by others (mode " + mode +
                      "): a secret must be readable by its owner only (chmod 600 '" + path + "')");
  }
  constexpr std::size_t limit = 4096;
  std::string text(limit + 1, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t r = ::read(fd.get(), text.data() + got, text.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw ConfigError(name + ": cannot read '" + path + "': " + errno_text(errno));
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  if (got > limit) throw ConfigError(name + ": '" + path + "' is larger than " + std::to_string(limit) + " bytes: not a secret");
  text.resize(got);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.empty()) throw ConfigError(name + ": '" + path + "' is empty");
  return text;
}

inline std::uint64_t tcp_parse_number(const TcpSettingText& s, const char* what, std::uint64_t max) {
  const std::string& t = *s.text;
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec == std::errc::invalid_argument || end != t.data() + t.size())
    throw ConfigError(s.name + ": '" + t + "' is not " + what);
  if (ec == std::errc::result_out_of_range || v > max)
    throw ConfigError(s.name + ": '" + t + "' is out of range (at most " + std::to_string(max) + ")");
  return v;
}

/// A setting that is auto, 0 or 1, for DataChecksums or FrameMacs.
template <class Scope>
inline Scope tcp_parse_link_scope(const TcpSettingText& s) {
  if (*s.text == "auto") return Scope::other_hosts;
  if (*s.text == "0") return Scope::off;
  if (*s.text == "1") return Scope::all;
  throw ConfigError(s.name + ": '" + *s.text + "' is not auto (connections to other hosts), 0 (none) or 1 (all)");
}


inline bool tcp_parse_switch(const TcpSettingText& s) {
  if (*s.text != "0" && *s.text != "1") throw ConfigError(s.name + ": '" + *s.text + "' is not 0 or 1");
  return *s.text == "1";
}

/// The shortest secret accepted: a guessable one would authenticate nothing.
inline constexpr std::size_t min_secret_bytes = 16;

inline void tcp_validate(const Options& o) {
  if (o.world_size == 0) throw ConfigError("tcp: the world size (FLOTILLA_WORLD_SIZE) must be at least 1");
  if (o.rank >= o.world_size)
    throw ConfigError("tcp: rank " + std::to_string(o.rank) + " (FLOTILLA_RANK) is not below the world size " +
                      std::to_string(o.world_size) + " (FLOTILLA_WORLD_SIZE): ranks are 0 to " +
                      std::to_string(o.world_size - 1));
  if (o.world_size > 0xFFFFFFFFu) throw ConfigError("tcp: the world size is too large");
  if (o.timeout.count() <= 0) throw ConfigError("tcp: the timeout (FLOTILLA_TIMEOUT_MS) must be positive");
  if (o.connect_timeout.count() <= 0)
    throw ConfigError("tcp: the connect timeout (FLOTILLA_CONNECT_TIMEOUT_MS) must be positive");
  if (o.world_size > 1) {
    if (o.coordinator.empty())
      throw ConfigError("tcp: a job of " + std::to_string(o.world_size) +
                        " ranks needs the coordinator's host:port (FLOTILLA_COORDINATOR; rank 0 listens there)");
    const auto hp = parse_host_port(o.coordinator);
    if (!hp || hp->port == 0)
      throw ConfigError("tcp: the coordinator (FLOTILLA_COORDINATOR) '" + o.coordinator +
                        "' is not host:port with a port from 1 to 65535 (e.g. 127.0.0.1:29500)");
    if (o.bind.empty()) throw ConfigError("tcp: the bind address (FLOTILLA_BIND) is empty");
    // The hosts go to the other ranks in hellos and the table, whose decoders refuse anything else.
    if (!detail::wire_host_valid(hp->host))
      throw ConfigError("tcp: the coordinator (FLOTILLA_COORDINATOR) '" + o.coordinator +
                        "' has a host that is not up to 255 printable ASCII characters without spaces");
    if (!detail::wire_host_valid(o.bind))
      throw ConfigError("tcp: the bind address (FLOTILLA_BIND) '" + o.bind +
                        "' is not up to 255 printable ASCII characters without spaces");
    if (!o.secret.empty() && o.secret.size() < min_secret_bytes)
      throw ConfigError("tcp: the shared secret (FLOTILLA_SECRET or FLOTILLA_SECRET_FILE) is " +
                        std::to_string(o.secret.size()) + " bytes; it must be at least " + std::to_string(min_secret_bytes) +
                        " (for example: head -c 24 /dev/urandom | base64 > secret; chmod 600 secret)");
    if (o.secret.empty()) {
      // Anyone who can reach a listening port could otherwise join the job, or feed it data.
      if (!is_loopback_host(o.bind))
        throw ConfigError("tcp: rank " + std::to_string(o.rank) + " listens on " + o.bind +
                          " (FLOTILLA_BIND), which other machines can reach: set a shared secret, the same on every "
                          "rank, with FLOTILLA_SECRET or FLOTILLA_SECRET_FILE (a file only its owner can read)");
      if (o.rank == 0 && !is_loopback_host(hp->host))
        throw ConfigError("tcp: rank 0 listens at the coordinator address " + o.coordinator +
                          " (FLOTILLA_COORDINATOR), which other machines can reach: set a shared secret, the same on "
                          "every rank, with FLOTILLA_SECRET or FLOTILLA_SECRET_FILE (a file only its owner can read)");
    }
  }
  if (o.rejoin.size() >= o.world_size && !o.rejoin.empty())
    throw ConfigError("tcp: FLOTILLA_REJOIN names " + std::to_string(o.rejoin.size()) + " ranks, but a job of " +
                      std::to_string(o.world_size) + " has only " + std::to_string(o.world_size - 1) + " others");
  for (const auto& r : o.rejoin) {
    const auto hp = parse_host_port(r);
    if (!hp || hp->port == 0)
      throw ConfigError("tcp: FLOTILLA_REJOIN entry '" + r + "' is not host:port with a port from 1 to 65535");
  }
  if (o.heartbeat_interval.count() <= 0)
    throw ConfigError("tcp: the heartbeat interval (FLOTILLA_HEARTBEAT_MS) must be positive");
  if (o.heartbeat_misses < 2)
    throw ConfigError("tcp: heartbeat_misses must be at least 2 (one late heartbeat is not a stalled peer)");
  if (o.host.size() > 256 || o.host.find_first_of(" \t\r\n") != std::string::npos)
    throw ConfigError("tcp: the host name for the shared-memory sums (TcpOptions::host) must be a word of at most 256 "
                      "characters, not '" + o.host.substr(0, 300) + "'");
  if (o.shared_memory != SharedMemory::off && !shared_memory_piece_bytes_valid(o.shared_memory_bytes))
    throw ConfigError("tcp: shared_memory_bytes (FLOTILLA_SHARED_MEMORY) is " + std::to_string(o.shared_memory_bytes) +
                      ": the shared-memory path needs 64 bytes to 1 GiB per piece");
}

inline Options tcp_options_from(TcpSettingTexts t) {
  tcp_take_launcher(t);
  Options o;
  constexpr std::uint64_t max_ranks = 0xFFFFFFFFu;
  if (t.world_size.text) {
    o.world_size = static_cast<std::size_t>(tcp_parse_number(t.world_size, "a number of ranks", max_ranks));
    if (o.world_size == 0) throw ConfigError(t.world_size.name + ": '" + *t.world_size.text + "' must be at least 1");
  }
  if (t.rank.text) {
    o.rank = static_cast<std::size_t>(tcp_parse_number(t.rank, "a rank (a whole number from 0)", max_ranks));
    if (!t.world_size.text)
      throw ConfigError(t.world_size.name + " is not set, but " + t.rank.name + " is " + *t.rank.text +
                        ": a rank needs the world size");
    if (o.rank >= o.world_size)
      throw ConfigError(t.rank.name + " is " + *t.rank.text + ", but " + t.world_size.name + " is " +
                        *t.world_size.text + ": ranks are 0 to " + std::to_string(o.world_size - 1));
  } else if (o.world_size > 1) {
    throw ConfigError(t.rank.name + " is not set, but " + t.world_size.name + " is " + *t.world_size.text +
                      ": every process of a job needs its rank (0 to " + std::to_string(o.world_size - 1) + ")");
  }
  if (t.coordinator.text) {
    const auto hp = parse_host_port(*t.coordinator.text);
    if (!hp || hp->port == 0)
      throw ConfigError(t.coordinator.name + ": '" + *t.coordinator.text +
                        "' is not host:port with a port from 1 to 65535 (e.g. 127.0.0.1:29500)");
    o.coordinator = *t.coordinator.text;
  } else if (o.world_size > 1) {
    throw ConfigError(t.coordinator.name + " is not set, but " + t.world_size.name + " is " + *t.world_size.text +
                      ": the ranks need the coordinator's host:port (rank 0 listens there)");
  }
  if (t.bind.text) {
    if (t.bind.text->empty()) throw ConfigError(t.bind.name + ": '' is not an address");
    o.bind = *t.bind.text;
  }
  constexpr std::uint64_t max_ms = 7ull * 24 * 3600 * 1000;  // a week: anything longer is a typo
  if (t.timeout_ms.text) {
    o.timeout = std::chrono::milliseconds(tcp_parse_number(t.timeout_ms, "a number of milliseconds", max_ms));
    if (o.timeout.count() == 0) throw ConfigError(t.timeout_ms.name + ": '0' must be a positive number of milliseconds");
  }
  if (t.connect_timeout_ms.text) {
    o.connect_timeout =
        std::chrono::milliseconds(tcp_parse_number(t.connect_timeout_ms, "a number of milliseconds", max_ms));
    if (o.connect_timeout.count() == 0)
      throw ConfigError(t.connect_timeout_ms.name + ": '0' must be a positive number of milliseconds");
  }
  if (t.socket_buffer.text)
    o.socket_buffer_bytes = static_cast<std::size_t>(tcp_parse_number(t.socket_buffer, "a number of bytes", 1u << 30));
  if (t.unsent_limit.text)
    o.unsent_limit_bytes = static_cast<std::size_t>(tcp_parse_number(t.unsent_limit, "a number of bytes", 1u << 30));
  if (t.read_while_sending.text) o.read_while_sending = tcp_parse_switch(t.read_while_sending);
  if (t.shared_memory.text) {
    const std::string& v = *t.shared_memory.text;
    if (v == "auto") {
      o.shared_memory = SharedMemory::automatic;
    } else if (v == "on") {
      o.shared_memory = SharedMemory::on;
    } else if (v == "off" || v == "0") {
      o.shared_memory = SharedMemory::off;
    } else {
      if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos)
        throw ConfigError(t.shared_memory.name + ": '" + v + "' is not auto, on, off or a number of bytes");
      o.shared_memory = SharedMemory::on;
      o.shared_memory_bytes = static_cast<std::size_t>(tcp_parse_number(t.shared_memory, "a number of bytes", 1u << 30));
    }
  }
  if (t.secret.text && t.secret_file.text)
    throw ConfigError(t.secret.name + " and " + t.secret_file.name + " are both set: give the secret one way");
  if (t.secret.text) {
    if (t.secret.text->empty()) throw ConfigError(t.secret.name + " is set but empty");
    o.secret = *t.secret.text;
  }
  if (t.secret_file.text) o.secret = read_secret_file(*t.secret_file.text, t.secret_file.name);
  // A job started by flotilla-launch has a secret of its own (transport/tcp/launch.hpp), so that
  // only the processes it started can join; a secret the user gave wins.
  if (!t.secret.text && !t.secret_file.text && t.launch_secret.text && !t.launch_secret.text->empty())
    o.secret = *t.launch_secret.text;
  if (t.heartbeat_ms.text) {
    o.heartbeat_interval = std::chrono::milliseconds(tcp_parse_number(t.heartbeat_ms, "a number of milliseconds", 3'600'000));
    if (o.heartbeat_interval.count() == 0)
      throw ConfigError(t.heartbeat_ms.name + ": '0' must be a positive number of milliseconds");
  }
  if (t.checksum_data.text) o.checksum_data = tcp_parse_link_scope<DataChecksums>(t.checksum_data);
  if (t.frame_mac.text) o.frame_mac = tcp_parse_link_scope<FrameMacs>(t.frame_mac);
  if (t.spin_us.text)  // a second at most: anything longer is a typo, and burns a core
    o.spin = std::chrono::microseconds(tcp_parse_number(t.spin_us, "a number of microseconds", 1'000'000));
  if (t.rejoin.text) {
    std::string_view rest(*t.rejoin.text);
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string item(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
      if (item.empty()) continue;
      const auto hp = parse_host_port(item);
      if (!hp || hp->port == 0)
        throw ConfigError(t.rejoin.name + ": '" + item +
                          "' is not host:port with a port from 1 to 65535 (give each rank to reconnect to as it "
                          "printed its address, comma-separated)");
      o.rejoin.push_back(item);
    }
  }
  return o;
}

}  // namespace detail

inline Options Options::from_environment() {
  const auto env = detail::tcp_setting_from_env;
  return detail::tcp_options_from({env("FLOTILLA_RANK"), env("FLOTILLA_WORLD_SIZE"), env("FLOTILLA_COORDINATOR"),
                                   env("FLOTILLA_BIND"), env("FLOTILLA_TIMEOUT_MS"), env("FLOTILLA_CONNECT_TIMEOUT_MS"),
                                   env("FLOTILLA_SOCKET_BUFFER"), env("FLOTILLA_UNSENT_LIMIT"),
                                   env("FLOTILLA_READ_WHILE_SENDING"), env("FLOTILLA_SECRET"), env("FLOTILLA_SECRET_FILE"),
                                   env("FLOTILLA_HEARTBEAT_MS"), env("FLOTILLA_CHECKSUM_DATA"), env("FLOTILLA_FRAME_MAC"),
                                   env("FLOTILLA_SHARED_MEMORY"), env("FLOTILLA_SPIN_US"), env("FLOTILLA_REJOIN"),
                                   env("FLOTILLA_LAUNCH_SECRET"), launch_environment()});
}

}  // namespace flotilla::transport::tcp
#endif  // FLOTILLA_TRANSPORT_TCP_OPTIONS_HPP_INCLUDED
