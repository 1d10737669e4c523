#pragma once
// The TCP transport: one process per rank, on one host or several. flotilla/flotilla.hpp does not
// include it (it needs Boost.Asio); include it yourself and link flotilla::tcp.
//
//   flotilla-launch -n 4 -- ./train          # on one machine: see tcp_launch.hpp
//   transport::Tcp::run(transport::TcpOptions::from_environment(), 4, [](transport::TcpEndpoint& e) { ... });
//
// Design, in short (docs/concepts/transport.md has the long form):
//  - Rendezvous: rank 0 listens at the coordinator's host:port; every other rank listens on an
//    ephemeral port of its bind address, registers (rank, host, port) with rank 0 and receives the
//    table of every rank's address. Rank 0's registration connections are its links; between the
//    other ranks the lower rank connects to the higher. Each connection starts with a hello both
//    ways (protocol version, world size, rank, job id), checked on both sides, and, when the job
//    has a shared secret, a challenge-response both ways (tcp_wire.hpp). A connection that fails
//    the handshake (garbage, another version, no or a wrong secret) is dropped and logged, and the
//    rendezvous goes on; a peer that authenticates but disagrees on the job ends it.
//  - Frames (tcp_wire.hpp): a 48-byte header with a CRC, then the payload. A header and its payload
//    go out in one gather write, straight from the caller's memory.
//  - Receiving: a frame whose receive is already posted, and whose size matches, is read straight
//    into the caller's buffer; other frames are read into memory of their own (after their length
//    has been checked) and queued per peer, so that tags can be received in any order.
//  - One thread, non-blocking Boost.Asio sockets (tcp_socket.hpp), one io_context per endpoint:
//    data moves with read_some/write_some straight from and to the caller's memory, and the loop
//    waits with async_wait (wait_read/wait_write) on the links it needs and run_one_until() up to
//    the deadline. Waits stay armed across iterations and operations; every open link has a read
//    wait (but one parked with data that nothing needs yet, read at the next stall), so that a
//    peer's hang-up ends the wait at once. sendrecv writes and reads at once,
//    alternating quanta of 256 KiB so that both directions flow together and what arrives is read
//    while it is still in cache (about a third faster at 64 MiB than writing all the socket takes).
//    Links that the operation in progress does not need are left unread (their data waits in the
//    kernel, where it costs no copy) until the reactor has seen no progress for a moment; then
//    everything pending is read, so that two ranks that both send large messages before receiving
//    cannot deadlock.
//  - Every wait ends by the timeout with a TransportError naming this rank, the peer, its host:port
//    and the operation. A peer whose connection ends is reported at once, whatever this rank was
//    waiting for. A rank whose body throws tells its peers why (an abort frame) before it closes.
//  - Heartbeats: a second thread per endpoint sends a heartbeat frame on every connection each
//    heartbeat interval (between the endpoint's frames, never inside one: the two share a lock per
//    connection), also while the rank computes. A wait on a peer that has sent nothing for
//    heartbeat_misses intervals fails with PeerLostError: it is stopped, hung or unreachable.
//  - Rejoining: every rank but 0 keeps its rendezvous listener. One told to accept rejoins (a
//    parameter server going on without lost workers) runs the same handshake on a connection that
//    arrives while it waits, and reopens the link of a lost rank that restarted with
//    TcpOptions::rejoin (a rank still alive is refused); the restarted rank connects only to the
//    ranks it names, and takes the others as lost (docs/reliability.md, "Rejoining").
//  - Ranks on one host sum float buffers through a shared-memory segment instead of their sockets
//    (TcpOptions::shared_memory, on by default for them; tcp_shared_memory.hpp): the endpoint's
//    own allreduce_sum, agreed on and set up during connect() over the authenticated connections.
//  - Shutdown: every rank sends a goodbye on each connection and closes only once it has a goodbye
//    from every peer, so that no rank closes a connection that another still reads.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "flotilla/cli/flags.hpp"
#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/transport/operation.hpp"
#include "flotilla/transport/tcp_shared_memory.hpp"
#include "flotilla/transport/tcp_socket.hpp"
#include "flotilla/transport/tcp_wire.hpp"

namespace flotilla::transport {

/// Whether a job's ranks sum through shared memory when they are on one host
/// (TcpOptions::shared_memory).
enum class TcpSharedMemory { off, automatic, on };

/// The settings of a TCP job. Each one can come from an environment variable (from_environment())
/// or a command-line flag (TcpFlags); flotilla-launch sets the first three for every rank.
struct TcpOptions {
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
  /// Whether float sums (the endpoint's own allreduce, NativeAllreduce: what
  /// collective::ring_allreduce and the trainer's buckets use) go through a shared-memory segment
  /// instead of the sockets (transport/tcp_shared_memory.hpp). `automatic` (the default): when
  /// every rank is on rank 0's host (it reached rank 0 over loopback, or from rank 0's own
  /// address) and all can map the segment, else the sockets, with one line to `log` when ranks on
  /// one host could not map it. `on`: required; a rank that cannot map it fails the rendezvous on
  /// every rank, naming itself and why. `off`: the sockets always. Every rank must agree: a rank
  /// with `off` turns it off for the job, and `on` against `off` fails the rendezvous. Bytes summed
  /// this way do not appear in counters(): they never go on the wire. FLOTILLA_SHARED_MEMORY,
  /// --shared-memory: `auto`, `on`, `off` (or 0), or a number of bytes (`on`, with that
  /// shared_memory_bytes).
  TcpSharedMemory shared_memory = TcpSharedMemory::automatic;
  /// The bytes the shared-memory path sums per step: larger sums go through it in pieces of this
  /// size (two ranks: of at most 384 KiB, which measured faster for them). The segment holds
  /// 2 x ranks x this many bytes of /dev/shm, reserved when it is made. The default is the best
  /// of 256 KiB to 2 MiB on the 2-core machine of docs/benchmarks.md (pieces that stay in the
  /// caches). Rank 0's value is the job's, unless a rank with `on` gives another.
  std::size_t shared_memory_bytes = std::size_t{1} << 20;
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
  /// Whether data frames carry a CRC-32 of their payload, checked on receipt. Control frames always
  /// do. Off by default: it costs a pass over every message on both sides (docs/reliability.md has
  /// the measurement), and TCP's own checksum already covers each segment.
  /// FLOTILLA_CHECKSUM_DATA (0 or 1), --checksum-data.
  bool checksum_data = false;
  /// How long a wait keeps retrying its sockets before it sleeps in the reactor (epoll). A rank
  /// that sleeps must be woken when its message arrives: by the kernel, and on a virtual machine by
  /// the host resuming its virtual CPU, tens of microseconds per message, which is most of the
  /// time of a small allreduce. Retrying first, yielding the core between tries (so that a thread
  /// of this process with work, such as the trainer's backward pass, keeps it), takes the
  /// message as soon as it is there: 4 KiB summed by 2 ranks over loopback went from 0.13 to 0.55
  /// GB/s (docs/benchmarks.md). The time counts from the last byte read or written, so a rank
  /// sleeps only once its sockets have been idle that long, never in the middle of a transfer
  /// that is moving. 0: sleep at once. The shared-memory path spins on its own (for up to
  /// 200 us). FLOTILLA_SPIN_US, --spin-us.
  std::chrono::microseconds spin{50};
  /// Where the transport reports what it drops (a connection that failed the handshake). Empty:
  /// one line on stderr.
  std::function<void(const std::string&)> log;
  /// Instead of the rendezvous, rejoin a running job as this rank after it was lost (its process
  /// died and was started again): host:port of each rank to reconnect to, as each printed it
  /// (TcpEndpoint::rejoin_address; the parameter servers of a job that goes on without lost
  /// workers). Each authenticates with the same handshake and refuses a rank that is still alive.
  /// FLOTILLA_REJOIN, comma-separated.
  std::vector<std::string> rejoin;

  /// The silence after which a waited-for peer is declared stalled.
  std::chrono::milliseconds stall_limit() const noexcept { return heartbeat_interval * heartbeat_misses; }

  /// The options from FLOTILLA_RANK, FLOTILLA_WORLD_SIZE, FLOTILLA_COORDINATOR, FLOTILLA_BIND,
  /// FLOTILLA_TIMEOUT_MS, FLOTILLA_CONNECT_TIMEOUT_MS, FLOTILLA_SOCKET_BUFFER, FLOTILLA_SECRET,
  /// FLOTILLA_SECRET_FILE, FLOTILLA_HEARTBEAT_MS, FLOTILLA_CHECKSUM_DATA, FLOTILLA_SHARED_MEMORY,
  /// FLOTILLA_SPIN_US and FLOTILLA_REJOIN; unset variables keep
  /// the defaults above. A value that cannot be used is a ConfigError naming the variable and the
  /// text (never the secret).
  static TcpOptions from_environment();
};

namespace detail {

/// One setting's text, when it was given, and how to name it in a message.
struct TcpSettingText {
  std::optional<std::string> text;
  std::string name;
};
struct TcpSettingTexts {
  TcpSettingText rank, world_size, coordinator, bind, timeout_ms, connect_timeout_ms, socket_buffer;
  TcpSettingText secret, secret_file, heartbeat_ms, checksum_data, shared_memory, spin_us;
};

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

inline void tcp_validate(const TcpOptions& o) {
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
  if (o.shared_memory != TcpSharedMemory::off && !shared_memory_piece_bytes_valid(o.shared_memory_bytes))
    throw ConfigError("tcp: shared_memory_bytes (FLOTILLA_SHARED_MEMORY) is " + std::to_string(o.shared_memory_bytes) +
                      ": the shared-memory path needs 64 bytes to 1 GiB per piece");
}

inline TcpOptions tcp_options_from(const TcpSettingTexts& t) {
  TcpOptions o;
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
  if (t.shared_memory.text) {
    const std::string& v = *t.shared_memory.text;
    if (v == "auto") {
      o.shared_memory = TcpSharedMemory::automatic;
    } else if (v == "on") {
      o.shared_memory = TcpSharedMemory::on;
    } else if (v == "off" || v == "0") {
      o.shared_memory = TcpSharedMemory::off;
    } else {
      if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos)
        throw ConfigError(t.shared_memory.name + ": '" + v + "' is not auto, on, off or a number of bytes");
      o.shared_memory = TcpSharedMemory::on;
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
  if (t.heartbeat_ms.text) {
    o.heartbeat_interval = std::chrono::milliseconds(tcp_parse_number(t.heartbeat_ms, "a number of milliseconds", 3'600'000));
    if (o.heartbeat_interval.count() == 0)
      throw ConfigError(t.heartbeat_ms.name + ": '0' must be a positive number of milliseconds");
  }
  if (t.checksum_data.text) {
    if (*t.checksum_data.text != "0" && *t.checksum_data.text != "1")
      throw ConfigError(t.checksum_data.name + ": '" + *t.checksum_data.text + "' is not 0 or 1");
    o.checksum_data = *t.checksum_data.text == "1";
  }
  if (t.spin_us.text)  // a second at most: anything longer is a typo, and burns a core
    o.spin = std::chrono::microseconds(tcp_parse_number(t.spin_us, "a number of microseconds", 1'000'000));
  return o;
}

}  // namespace detail

inline TcpOptions TcpOptions::from_environment() {
  auto env = [](const char* name) {
    detail::TcpSettingText s;
    s.name = name;
    if (const char* v = std::getenv(name)) s.text = std::string(v);
    return s;
  };
  TcpOptions o = detail::tcp_options_from({env("FLOTILLA_RANK"), env("FLOTILLA_WORLD_SIZE"), env("FLOTILLA_COORDINATOR"),
                                   env("FLOTILLA_BIND"), env("FLOTILLA_TIMEOUT_MS"), env("FLOTILLA_CONNECT_TIMEOUT_MS"),
                                   env("FLOTILLA_SOCKET_BUFFER"), env("FLOTILLA_SECRET"), env("FLOTILLA_SECRET_FILE"),
                                   env("FLOTILLA_HEARTBEAT_MS"), env("FLOTILLA_CHECKSUM_DATA"),
                                   env("FLOTILLA_SHARED_MEMORY"), env("FLOTILLA_SPIN_US")});
  if (const char* v = std::getenv("FLOTILLA_REJOIN"); v != nullptr && *v != '\0') {
    std::string_view rest(v);
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const auto item = rest.substr(0, comma);
      if (!item.empty()) o.rejoin.emplace_back(item);
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
  }
  return o;
}

/// The TCP settings as command-line flags of a cli::Flags, each falling back to its environment
/// variable: --rank, --world-size, --coordinator, --bind, --timeout-ms, --connect-timeout-ms,
/// --socket-buffer, --secret-file, --heartbeat-ms, --checksum-data, --shared-memory, --spin-us. (The secret itself has no flag:
/// a command line is visible to every user of the machine. FLOTILLA_SECRET still applies.)
///
///   cli::Flags flags("train", "...");
///   transport::TcpFlags tcp(flags);
///   if (!flags.parse(argc, argv, std::cout)) return 0;
///   transport::Tcp::run(tcp.options(), 4, body);
class TcpFlags {
 public:
  explicit TcpFlags(cli::Flags& flags)
      : rank_(flags.add<std::string>("rank", "", "this process's rank, 0 to world-size - 1", "FLOTILLA_RANK")),
        world_size_(flags.add<std::string>("world-size", "", "the number of processes in the job (unset: 1)",
                                           "FLOTILLA_WORLD_SIZE")),
        coordinator_(flags.add<std::string>("coordinator", "",
                                            "host:port where rank 0 listens for the others to register",
                                            "FLOTILLA_COORDINATOR")),
        bind_(flags.add<std::string>("bind", "127.0.0.1",
                                     "the address this rank listens on (0.0.0.0: every interface)", "FLOTILLA_BIND")),
        timeout_(flags.add<std::string>("timeout-ms", "30000", "the longest any transport wait may last, in ms",
                                        "FLOTILLA_TIMEOUT_MS")),
        connect_timeout_(flags.add<std::string>("connect-timeout-ms", "30000",
                                                "how long the rendezvous of the ranks may take, in ms",
                                                "FLOTILLA_CONNECT_TIMEOUT_MS")),
        socket_buffer_(flags.add<std::string>("socket-buffer", "0",
                                              "socket buffer size in bytes (0: the kernel's automatic tuning)",
                                              "FLOTILLA_SOCKET_BUFFER")),
        secret_file_(flags.add<std::string>("secret-file", "",
                                            "a file holding the shared secret (readable by its owner only)",
                                            "FLOTILLA_SECRET_FILE")),
        heartbeat_(flags.add<std::string>("heartbeat-ms", "500", "heartbeat interval in ms; a peer silent for 6 is stalled",
                                          "FLOTILLA_HEARTBEAT_MS")),
        checksum_data_(flags.add<std::string>("checksum-data", "0", "1: a CRC-32 on every data frame's payload",
                                              "FLOTILLA_CHECKSUM_DATA")),
        shared_memory_(flags.add<std::string>("shared-memory", "auto",
                                              "ranks on one host sum through shared memory: auto, on, off, or on with "
                                              "pieces of this many bytes",
                                              "FLOTILLA_SHARED_MEMORY")),
        spin_(flags.add<std::string>("spin-us", "50",
                                     "how long a wait retries its sockets before it sleeps, in microseconds (0: sleep at once)",
                                     "FLOTILLA_SPIN_US")) {}

  /// The options given (call after Flags::parse); ConfigError naming the flag for a bad value.
  TcpOptions options() const {
    auto item = [](const std::string& v, const char* flag, const char* env) {
      detail::TcpSettingText s;
      s.name = std::string("--") + flag + " (" + env + ")";
      if (!v.empty()) s.text = v;
      return s;
    };
    return detail::tcp_options_from({item(rank_, "rank", "FLOTILLA_RANK"),
                                     item(world_size_, "world-size", "FLOTILLA_WORLD_SIZE"),
                                     item(coordinator_, "coordinator", "FLOTILLA_COORDINATOR"),
                                     item(bind_, "bind", "FLOTILLA_BIND"),
                                     item(timeout_, "timeout-ms", "FLOTILLA_TIMEOUT_MS"),
                                     item(connect_timeout_, "connect-timeout-ms", "FLOTILLA_CONNECT_TIMEOUT_MS"),
                                     item(socket_buffer_, "socket-buffer", "FLOTILLA_SOCKET_BUFFER"), secret_from_env(),
                                     item(secret_file_, "secret-file", "FLOTILLA_SECRET_FILE"),
                                     item(heartbeat_, "heartbeat-ms", "FLOTILLA_HEARTBEAT_MS"),
                                     item(checksum_data_, "checksum-data", "FLOTILLA_CHECKSUM_DATA"),
                                     item(shared_memory_, "shared-memory", "FLOTILLA_SHARED_MEMORY"),
                                     item(spin_, "spin-us", "FLOTILLA_SPIN_US")});
  }

 private:
  static detail::TcpSettingText secret_from_env() {
    detail::TcpSettingText s;
    s.name = "FLOTILLA_SECRET";
    if (const char* v = std::getenv("FLOTILLA_SECRET")) s.text = std::string(v);
    return s;
  }
  const std::string &rank_, &world_size_, &coordinator_, &bind_, &timeout_, &connect_timeout_, &socket_buffer_;
  const std::string &secret_file_, &heartbeat_, &checksum_data_, &shared_memory_, &spin_;
};

namespace detail {

inline constexpr std::size_t tcp_nobody = static_cast<std::size_t>(-1);

/// Bytes a link reads ahead into a buffer of its own: small frames are read whole, many at a time.
/// A payload whose rest is at least this large is read straight into its destination instead.
inline constexpr std::size_t tcp_read_buffer = 64 * 1024;

/// How long the reactor may see no progress on what an operation waits for before every link is
/// read, whatever it holds (see the file comment): long enough that a ring step's next message is not
/// copied aside just because its neighbour was descheduled for a moment.
inline constexpr std::chrono::milliseconds tcp_stall{20};

/// How much sendrecv writes before it reads again (see drive()). Measured on loopback with 64 MiB
/// messages: 256 KiB gave 20-50% more than writing all the socket takes (several MiB at a time);
/// 64 KiB was slower again (more system calls), 512 KiB to 1 MiB about the same.
inline constexpr std::size_t tcp_send_quantum = 256 * 1024;

/// The most one read takes of a payload that goes straight to its destination. Loopback carries
/// 64 KiB segments; a read of one segment copies it while it is still in cache and frees it at
/// once, where a read of all that has arrived (up to the several MiB of the socket's buffer) leaves
/// the later segments cold and the sender's window closed for longer. Measured between 2 ranks on
/// loopback (docs/benchmarks.md): 1.2-1.7x at 256 KiB, 1.2x at 1 MiB and 64 MiB, equal at 4 MiB,
/// against reads of everything; 16 and 32 KiB were slower than 64, 128 KiB no better than all.
inline constexpr std::size_t tcp_read_quantum = 64 * 1024;

/// A message that arrived before its receive: held until a recv with its tag takes it.
struct TcpMessage {
  Tag tag = 0;
  std::unique_ptr<std::byte[]> bytes;
  std::size_t size = 0;
  std::uint64_t arrival = 0;  // order of arrival over all links, for recv_any
  std::uint64_t fingerprint = 0;  // the sender's operation (transport/operation.hpp)
};

/// What a link's writer shares with the heartbeat thread: the two write to one socket, whole frames
/// each, never one inside the other.
struct TcpSendGuard {
  std::mutex m;
  int fd = -1;              // the socket, while open
  bool beating = false;     // heartbeats go out (from the end of the handshake to the last frame)
  bool mid_frame = false;   // the endpoint has written part of a frame: a heartbeat would split it
  wire::HeaderBytes beat = [] {
    wire::Header h;
    h.type = wire::FrameType::heartbeat;
    return wire::encode(h);
  }();
  std::size_t beat_done = wire::header_size;  // below header_size: a heartbeat partly written

  /// Writes what is left of a heartbeat (with `m` held); false when the socket takes no more now.
  /// An error is left for the endpoint's next write to report.
  bool finish_beat() noexcept {
    while (beat_done < wire::header_size && fd >= 0) {
      const ssize_t r = ::send(fd, beat.data() + beat_done, wire::header_size - beat_done, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (r > 0) {
        beat_done += static_cast<std::size_t>(r);
      } else if (r < 0 && errno == EINTR) {
        continue;
      } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return false;
      } else {
        beat_done = wire::header_size;
        return true;
      }
    }
    return true;
  }
};

/// The thread that sends every link's heartbeats, also while the rank's own thread computes (it
/// does not touch the endpoint, only the links' send guards).
class TcpHeartbeat {
 public:
  TcpHeartbeat(std::vector<std::shared_ptr<TcpSendGuard>> guards, std::chrono::milliseconds interval)
      : guards_(std::move(guards)), interval_(interval), thread_([this] { run(); }) {}
  TcpHeartbeat(const TcpHeartbeat&) = delete;
  TcpHeartbeat& operator=(const TcpHeartbeat&) = delete;
  ~TcpHeartbeat() {
    {
      std::lock_guard lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void run() {
    std::unique_lock lock(m_);
    while (!cv_.wait_for(lock, interval_, [this] { return stop_; })) {
      lock.unlock();
      for (const auto& g : guards_) {
        std::lock_guard gl(g->m);
        if (g->fd < 0 || !g->beating || g->mid_frame) continue;
        if (g->beat_done == wire::header_size) g->beat_done = 0;
        g->finish_beat();
      }
      lock.lock();
    }
  }

  std::vector<std::shared_ptr<TcpSendGuard>> guards_;
  std::chrono::milliseconds interval_;
  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;  // last: it starts once the rest is ready
};

/// A connection to one peer, and the state of the frame being read from it.
struct TcpLink {
  explicit TcpLink(std::shared_ptr<TcpReactor> r) : reactor(std::move(r)), socket(reactor->io) {}

  std::shared_ptr<TcpReactor> reactor;  // first: it outlives the socket
  TcpSocket socket;
  // The reactor's waits on `socket` (see TcpEndpoint::drive): armed, and completed since last seen.
  bool read_armed = false, write_armed = false;
  bool read_fired = false;
  ErrorCode wait_error;
  // Data arrived that the operation in progress did not need: no read wait is armed (it would
  // complete at once) until the link has been read dry.
  bool parked = false;

  std::size_t peer = tcp_nobody;
  std::string address;  // host:port where the peer listens, for messages
  std::uint64_t send_sequence = 0;
  std::uint64_t recv_sequence = 0;
  bool send_broken = false;  // a frame was left half-written: the stream cannot carry another
  std::shared_ptr<TcpSendGuard> guard = std::make_shared<TcpSendGuard>();
  Clock::time_point heard{};  // when anything last arrived from the peer
  bool lost = false;          // the peer died or stalled (see TcpEndpoint::continue_without_lost_peers)

  std::unique_ptr<std::byte[]> buffer = std::make_unique_for_overwrite<std::byte[]>(tcp_read_buffer);
  std::size_t begin = 0, end = 0;  // unread bytes in `buffer`

  enum class Sink : std::uint8_t { staging, user, discard };
  bool in_frame = false;  // a header has been read, its payload has not (all)
  bool large = false;     // the last frame's payload was larger than `buffer`
  wire::Header frame{};
  std::uint64_t frame_done = 0;  // payload bytes of `frame` read so far
  Sink sink = Sink::staging;
  std::byte* user = nullptr;              // Sink::user: the posted receive's buffer
  std::unique_ptr<std::byte[]> staging;   // Sink::staging: memory of the frame's own

  std::deque<TcpMessage> queue;           // data frames read, not yet received
  std::vector<std::uint64_t> tokens;      // barrier tokens read: epoch << 32 | round
  bool goodbye = false;                   // the peer has sent its last frame
  bool eof = false;                       // ... and closed its side (only after goodbye)

  bool open() const noexcept { return socket.is_open(); }
  void close() noexcept {
    {
      std::lock_guard lock(guard->m);  // the heartbeat thread must not write to a reused descriptor
      guard->fd = -1;
      guard->beating = false;
    }
    ErrorCode ec;
    socket.close(ec);  // cancels the armed waits
  }

  /// Arms the reactor's wait for `type` on the socket, unless it is armed already. The completion
  /// marks the link and counts an event (the handler holds no pointer but to the link, whose
  /// address the vector of links keeps, and to its reactor).
  void arm(asio::socket_base::wait_type type) {
    bool& armed = type == asio::socket_base::wait_write ? write_armed : read_armed;
    if (armed) return;
    armed = true;
    socket.async_wait(type, [this, type](const ErrorCode& ec) {
      (type == asio::socket_base::wait_write ? write_armed : read_armed) = false;
      if (ec == asio::error::operation_aborted) return;
      if (type != asio::socket_base::wait_write) read_fired = true;
      if (ec) wait_error = ec;
      ++reactor->events;
    });
  }
};

/// The listener a rank keeps after the rendezvous to accept a lost rank that restarted
/// (TcpEndpoint::accept_rejoins). On the heap: its wait's handler points at it, and the endpoint moves.
struct TcpRejoinListener {
  std::shared_ptr<TcpReactor> reactor;  // first: it outlives the acceptor
  Listener listener;
  bool armed = false, fired = false, failed = false;
  void arm() {
    if (armed || failed) return;
    armed = true;
    listener.acceptor.async_wait(asio::socket_base::wait_read, [this](const ErrorCode& ec) {
      armed = false;
      if (ec == asio::error::operation_aborted) return;
      if (ec) {
        failed = true;  // an acceptor that fails once would fail at every wait
      } else {
        fired = true;
      }
      ++reactor->events;
    });
  }
};

/// A receive in progress: recv (one peer), recv_any (peer == tcp_nobody) or sendrecv's half.
struct TcpPosted {
  std::size_t peer = tcp_nobody;
  Tag tag = 0;
  std::span<std::byte> buffer;
  bool done = false;
  std::size_t from = tcp_nobody;
  bool wrong_size = false;  // the message had another size: reported once it has been consumed
  std::uint64_t message_size = 0;
  TcpLink* adopted = nullptr;  // the link whose frame is being read for this receive
  std::uint64_t fingerprint = 0;  // this rank's operation on the tag when the receive was posted
};

/// A frame being written: header and payload, from the caller's memory, in one gather write.
struct TcpOutgoing {
  TcpLink* link = nullptr;
  wire::HeaderBytes header{};
  std::span<const std::byte> payload;
  std::size_t written = 0;
  std::size_t total() const noexcept { return wire::header_size + payload.size(); }
  bool done() const noexcept { return written == total(); }
};

/// What the endpoint is doing, for error messages.
struct TcpOp {
  const char* name = "";
  std::size_t to = tcp_nobody, from = tcp_nobody;
  Tag tag = 0;
  bool tagged = false;
};

}  // namespace detail

/// One rank's endpoint of a TCP job. See the Transport concept for the semantics of each operation.
class TcpEndpoint {
 public:
  /// Connects this process's rank to the others (the rendezvous; see the file comment). Throws
  /// ConfigError for unusable options, TransportError when the rendezvous fails or times out.
  /// Tcp::run() does this, then close() or abort(); use it directly to keep an endpoint across
  /// phases of a program.
  static TcpEndpoint connect(const TcpOptions& options);

  TcpEndpoint(TcpEndpoint&&) noexcept = default;
  TcpEndpoint& operator=(TcpEndpoint&&) noexcept = default;
  TcpEndpoint(const TcpEndpoint&) = delete;
  TcpEndpoint& operator=(const TcpEndpoint&) = delete;
  /// Closes the connections without a goodbye: peers still waiting on this rank get an error
  /// naming it. Call close() for an orderly end.
  ~TcpEndpoint() = default;

  std::size_t rank() const noexcept { return rank_; }
  std::size_t size() const noexcept { return size_; }
  /// Whether the connection to rank `peer` was lost (and not re-opened by a rejoin) and nothing it
  /// sent waits to be received any more: a receive from it could only fail. A loss that the
  /// operation in progress did not need is recorded without an error when lost peers are survived:
  /// a rank that serves many peers (a parameter server) looks here between receives.
  bool peer_lost(std::size_t peer) const noexcept {
    return peer < size_ && peer != rank_ && links_[peer].lost && links_[peer].queue.empty();
  }
  TrafficCounters counters() const noexcept { return counters_; }
  const TcpOptions& options() const noexcept { return options_; }
  /// The longest each later wait may last (TcpOptions::timeout): e.g. longer around a phase that
  /// keeps some ranks busy for a while, such as loading data or writing a checkpoint.
  void set_timeout(std::chrono::milliseconds timeout) {
    if (timeout.count() <= 0) throw ConfigError("tcp: the timeout must be positive");
    options_.timeout = timeout;
  }
  /// host:port where `peer` listens (rank 0: the coordinator's address).
  const std::string& address(std::size_t peer) const { return addresses_.at(peer); }
  /// After an operation failed because another rank failed (it died, or sent why it failed):
  /// that rank, the first to fail as far as this one knows. Empty otherwise.
  std::optional<std::size_t> failed_peer() const noexcept {
    if (broken_.empty() || culprit_ == rank_ || culprit_ == detail::tcp_nobody) return std::nullopt;
    return culprit_;
  }

  void send(std::size_t peer, Tag tag, std::span<const std::byte> bytes);
  void recv(std::size_t peer, Tag tag, std::span<std::byte> buffer);
  std::size_t recv_any(Tag tag, std::span<std::byte> buffer);
  void sendrecv(std::size_t to, Tag tag, std::span<const std::byte> out, std::size_t from, std::span<std::byte> in);
  void barrier();

  /// Declares that messages on `tag` belong to one call of `kind` over `elements` elements, until
  /// end_operation(tag): they carry its fingerprint, and a message from a peer in another call on
  /// that tag fails the receive naming both (transport/operation.hpp; OperationScope calls these).
  void begin_operation(Tag tag, OpKind kind, std::uint64_t elements) {
    auto& t = ops_[tag];
    ++t.rounds;
    t.current = Operation{kind, t.rounds, elements}.fingerprint();
  }
  void end_operation(Tag tag) noexcept {
    if (const auto it = ops_.find(tag); it != ops_.end()) it->second.current = 0;
  }

  /// Whether the endpoint stays usable after a peer dies or stalls (default: no). Either way the
  /// operation waiting on the peer throws PeerLostError naming it; when continuing, later
  /// operations with the other peers go on, recv_any no longer waits for the lost one, and close()
  /// expects no goodbye from it. For topologies that can do without a peer (asynchronous
  /// parameter servers dropping a dead worker).
  void continue_without_lost_peers(bool on) noexcept { survive_lost_peers_ = on; }
  /// With continue_without_lost_peers: whether the loss of any peer fails the operation in
  /// progress (PeerLostError naming it), not only of a peer that operation waits on, and whether
  /// every peer's heartbeats are watched, not only the waited-for ones'. For topologies whose
  /// ranks must all stop what they are doing when one is lost, wherever they are: a synchronous
  /// ring re-forming over the survivors (a rank waiting on a live neighbour would otherwise wait
  /// for a message that neighbour, gone to re-form the ring, will never send).
  void stop_on_any_lost_peer(bool on) noexcept { stop_on_any_loss_ = on; }
  /// Whether this rank accepts, while its operations wait, a lost peer that restarted and
  /// rejoins (TcpOptions::rejoin) with the same handshake: its link is then open again, from a
  /// clean stream. A rank that is not lost is refused (told why). Ranks but 0 can (rank 0's
  /// listener was the coordinator's); each connection's handshake may hold this rank up to 5 s.
  void accept_rejoins(bool on) noexcept { accept_rejoins_ = on && rejoin_listener_ != nullptr; }
  /// host:port where this rank accepts rejoining peers (empty for rank 0 and a rejoined rank).
  std::string rejoin_address() const { return rejoin_listener_ ? addresses_[rank_] : std::string(); }
  /// Whether this endpoint rejoined a running job (TcpOptions::rejoin) rather than starting with it.
  bool rejoined() const noexcept { return rejoined_; }
  /// The peers lost so far (empty unless continue_without_lost_peers(true)).
  std::vector<std::size_t> lost_peers() const {
    std::vector<std::size_t> out;
    for (const auto& l : links_)
      if (l.lost) out.push_back(l.peer);
    return out;
  }

  /// How many of the job's ranks run on this host, this one included (KnowsRanksOnHost): those
  /// whose connection to this rank came over loopback or from this rank's own address when the
  /// job started.
  std::size_t ranks_on_this_host() const noexcept { return ranks_on_host_; }

  /// The sum over every rank of `values`, through the shared-memory segment that
  /// TcpOptions::shared_memory sets up (all ranks on one host), in pieces of
  /// TcpOptions::shared_memory_bytes; ConfigError when it is not in use (shared_memory_active()).
  /// Every rank calls it with the same count, in the same order as its other collective calls.
  void allreduce_sum(std::span<float> values);
  /// Whether allreduce_sum is available: the job agreed on the shared-memory path in connect(),
  /// and no peer has been lost or has rejoined since (the ranks would no longer agree on it).
  bool shared_memory_active() const noexcept { return shared_memory_ != nullptr; }
  /// How large a sum allreduce_sum is the faster path for: any size while it is active (on the
  /// 2-core machine of docs/benchmarks.md it beat the sockets at every size from 4 KiB to 64 MiB,
  /// except 64-256 KiB when the host put the two CPUs apart), else 0: collective::ring_allreduce
  /// then uses the sockets.
  std::size_t native_allreduce_max_bytes() const noexcept {
    return shared_memory_ ? std::numeric_limits<std::size_t>::max() : 0;
  }

  /// The orderly end: a goodbye to every peer, then waits (up to the timeout) for every peer's
  /// goodbye, then closes. Messages sent to this rank and never received are dropped.
  void close();
  /// The end after a failure: tells every peer `reason` (they fail with it), then closes at once.
  void abort(std::string_view reason) noexcept;

 private:
  using Link = detail::TcpLink;
  using Clock = detail::Clock;

  TcpEndpoint(const TcpOptions& o, std::shared_ptr<detail::TcpReactor> reactor, std::vector<Link> links,
              std::vector<std::string> addresses, TrafficCounters handshake, std::optional<detail::Listener> listener,
              std::uint64_t job_id)
      : options_(o), rank_(o.rank), size_(o.world_size), reactor_(std::move(reactor)), links_(std::move(links)),
        addresses_(std::move(addresses)), counters_(handshake), job_id_(job_id) {
    if (listener)
      rejoin_listener_.reset(new detail::TcpRejoinListener{reactor_, std::move(*listener)});
    rejoined_ = !o.rejoin.empty();
    if (rejoined_) survive_lost_peers_ = true;  // the peers it did not reconnect to are gone for it
    std::vector<std::shared_ptr<detail::TcpSendGuard>> guards;
    const auto now = Clock::now();
    for (auto& l : links_) {
      l.heard = now;
      // Every peer's guard, also of a link not open: a peer that rejoins reuses it.
      if (l.peer != rank_ && l.peer != detail::tcp_nobody) guards.push_back(l.guard);
      if (!l.open()) {
        if (rejoined_ && l.peer != rank_) l.lost = true;
        continue;
      }
      std::lock_guard lock(l.guard->m);
      l.guard->fd = l.socket.native_handle();
      l.guard->beating = true;
    }
    if (!guards.empty()) heartbeat_ = std::make_unique<detail::TcpHeartbeat>(std::move(guards), options_.heartbeat_interval);
  }

  // ---- naming --------------------------------------------------------------------------------
  std::string who() const { return "tcp rank " + std::to_string(rank_) + " of " + std::to_string(size_); }
  std::string peer_name(std::size_t p) const {
    if (p == rank_) return "rank " + std::to_string(p) + " (itself)";
    return "rank " + std::to_string(p) + " at " + addresses_[p];
  }
  std::string describe_op() const {
    const auto& op = op_;
    std::string s = op.name;
    if (op.to != detail::tcp_nobody) s += " to " + peer_name(op.to);
    if (op.to != detail::tcp_nobody && op.from != detail::tcp_nobody) s += " and";
    if (op.from != detail::tcp_nobody) s += " from " + peer_name(op.from);
    if (std::string_view(op.name) == "recv_any") s += " from any rank";
    if (op.tagged) s += " (tag " + std::to_string(op.tag) + ")";
    return s;
  }
  std::string timeout_text() const { return "timed out after " + std::to_string(options_.timeout.count()) + " ms"; }

  /// Marks the endpoint failed (every later operation fails at once with the same cause) and
  /// throws. `why` names the peer; `culprit` is the rank whose failure this is (this rank's own:
  /// rank_). When it is a peer, abort() passes `why` and `culprit` on to the other ranks, so that
  /// every rank (and the launcher) names the rank that failed first.
  [[noreturn]] void fail(const std::string& why, std::size_t culprit) {
    broken_ = why;
    culprit_ = culprit;
    throw TransportError(who() + ": " + describe_op() + " failed: " + why);
  }
  [[noreturn]] void fail_link(Link& l, const std::string& why, std::size_t culprit) {
    l.close();
    fail(why, culprit);
  }
  /// The peer of `l` died or stalled: PeerLostError naming it. Unless the endpoint continues
  /// without lost peers, every later operation fails with the same cause, as after fail(). When it
  /// continues, and the operation in progress does not need the peer (`needed`), this returns: the
  /// loss shows in the operations that do need it.
  void lose_peer(Link& l, const std::string& why, bool needed) {
    const std::size_t p = l.peer;
    mark_lost(l);
    if (survive_lost_peers_ && !needed && !stop_on_any_loss_) return;
    if (!survive_lost_peers_) {
      broken_ = why;
      culprit_ = p;
    }
    throw PeerLostError(who() + ": " + describe_op() + " failed: " + why, p);
  }
  /// Closes `l` and records its peer as lost. The ranks' shared-memory calls would no longer
  /// match: from here on this rank sums through the sockets.
  void mark_lost(Link& l) {
    l.close();
    l.lost = true;
    shared_memory_.reset();
  }
  /// A connection arrived on the rejoin listener: handshake, then the lost peer's link anew.
  void accept_rejoin();

  [[noreturn]] void protocol_error(Link& l, const std::string& what) {
    fail_link(l, peer_name(l.peer) + " sent a bad frame: " + what + "; connection closed", rank_);
  }

  detail::TcpOp op_{};
  void begin(detail::TcpOp op) {
    op_ = op;
    if (closed_) throw TransportError(who() + ": " + describe_op() + ": the endpoint has been closed");
    if (!broken_.empty()) throw TransportError(who() + ": " + describe_op() + " abandoned: " + broken_);
    for (const std::size_t p : {op.to, op.from})
      if (p != detail::tcp_nobody && p >= size_)
        throw TransportError(who() + ": " + op.name + (p == op.to ? " to rank " : " from rank ") + std::to_string(p) +
                             ", but the job has " + std::to_string(size_) + " ranks");
  }
  Link& link(std::size_t peer) {
    Link& l = links_[peer];
    if (l.lost)
      throw PeerLostError(who() + ": " + describe_op() + ": " + peer_name(peer) + " was lost earlier (it died or stalled)",
                          peer);
    if (l.send_broken || !l.open())
      throw TransportError(who() + ": " + describe_op() + ": the connection to " + peer_name(peer) +
                           " is unusable after an earlier failure");
    return l;
  }
  Clock::time_point deadline() const { return Clock::now() + options_.timeout; }

  // ---- sending ---------------------------------------------------------------------------------
  detail::TcpOutgoing frame(Link& l, wire::FrameType type, Tag tag, std::uint32_t aux, std::span<const std::byte> payload) {
    detail::TcpOutgoing o;
    o.link = &l;
    wire::Header h;
    h.type = type;
    h.tag = tag;
    h.aux = aux;
    h.sequence = l.send_sequence++;
    h.payload_length = payload.size();
    if (type == wire::FrameType::data) h.fingerprint = current_fingerprint(tag);
    if (type != wire::FrameType::data || options_.checksum_data) wire::seal_payload(h, payload);
    wire::encode(h, o.header);
    o.payload = payload;
    if (type == wire::FrameType::goodbye || type == wire::FrameType::abort) {
      std::lock_guard lock(l.guard->m);  // the last frame on this connection: no heartbeat after it
      l.guard->beating = false;
    }
    return o;
  }

  std::uint64_t current_fingerprint(Tag tag) const {
    const auto it = ops_.find(tag);
    return it == ops_.end() ? 0 : it->second.current;
  }

  /// A message from `from` for receive `p`: both must be of one operation.
  void check_fingerprint(std::uint64_t theirs, const detail::TcpPosted& p, std::size_t from) {
    if (fingerprints_agree(theirs, p.fingerprint)) return;
    fail(peer_name(from) + " sent a message (tag " + std::to_string(p.tag) + ") of " +
             Operation::from_fingerprint(theirs).describe() + " while this rank is in " +
             Operation::from_fingerprint(p.fingerprint).describe() +
             ": the ranks disagree on which collective they are in (did one of them skip or add a call?)",
         rank_);
  }

  /// Writes as much of `o` as the socket takes now, or `quantum` bytes; true when the socket took
  /// all that was offered (it may take more).
  bool push(detail::TcpOutgoing& o, std::size_t quantum = static_cast<std::size_t>(-1)) {
    Link& l = *o.link;
    // Whole quanta, and no tail shorter than half a quantum: a 256 KiB message and its header go
    // out together, not as 256 KiB and then 48 bytes.
    const std::size_t left = o.total() - o.written;
    const std::size_t stop_at = o.written + (left - std::min(quantum, left) < quantum / 2 ? left : quantum);
    while (o.written < stop_at) {
      // One gather write (sendmsg): the rest of the header, then the payload up to `stop_at`.
      std::array<detail::asio::const_buffer, 2> bufs;
      std::size_t n = 0;
      if (o.written < wire::header_size)
        bufs[n++] = detail::asio::buffer(o.header.data() + o.written, wire::header_size - o.written);
      const std::size_t off = o.written > wire::header_size ? o.written - wire::header_size : 0;
      if (off < o.payload.size())
        bufs[n++] = detail::asio::buffer(o.payload.data() + off,
                                 std::min(o.payload.size() - off, stop_at - std::max(o.written, wire::header_size)));
      detail::ErrorCode ec;
      std::size_t r = 0;
      {
        // A heartbeat partly written goes first; none can start while this frame is partly written.
        std::lock_guard lock(l.guard->m);
        if (!l.guard->finish_beat()) return false;
        r = l.socket.write_some(std::span<const detail::asio::const_buffer>(bufs.data(), n), ec);
        if (!ec) l.guard->mid_frame = o.written + r < o.total();
      }
      if (!ec && r > 0) {
        o.written += r;
        bytes_moved_ += r;
        continue;
      }
      if (ec == detail::asio::error::interrupted) continue;
      if (!ec || detail::would_block(ec)) return false;
      // The peer is gone. If it said why (an abort frame), that is the better message: read it.
      if (!l.goodbye) pump(l, false);
      const bool closed = ec == detail::asio::error::broken_pipe || ec == detail::asio::error::connection_reset;
      lose_peer(l,
                peer_name(l.peer) + (closed ? " closed the connection" : " is unreachable") + " (" + ec.message() +
                    "; its process exited or was killed?)",
                true);
    }
    return true;
  }

  // ---- receiving -------------------------------------------------------------------------------
  /// Whether the operation in progress waits for something from `l`.
  bool wanted(const Link& l) const {
    if (l.peer == rank_ || l.lost) return false;
    if (posted_ && !posted_->done && (posted_->peer == l.peer || posted_->peer == detail::tcp_nobody) &&
        (posted_->adopted == nullptr || posted_->adopted == &l))
      return true;
    if (token_link_ == &l && std::find(l.tokens.begin(), l.tokens.end(), token_key_) == l.tokens.end()) return true;
    if (awaiting_goodbye_ && !l.goodbye) return true;
    return false;
  }

  /// Reads up to `most` bytes of `l` into its buffer; false when the socket has nothing now (or
  /// the peer closed after its goodbye).
  bool fill(Link& l, std::size_t most = detail::tcp_read_buffer) {
    if (l.begin == l.end) {
      l.begin = l.end = 0;
    } else if (l.begin > 0) {
      std::memmove(l.buffer.get(), l.buffer.get() + l.begin, l.end - l.begin);
      l.end -= l.begin;
      l.begin = 0;
    }
    return read_some(l, l.buffer.get() + l.end, std::min(most, detail::tcp_read_buffer - l.end), l.end);
  }

  /// One read_some (recvmsg) into [p, p + n); adds what arrived to `count`.
  template <class Count>
  bool read_some(Link& l, std::byte* p, std::size_t n, Count& count) {
    for (;;) {
      detail::ErrorCode ec;
      const std::size_t r = l.socket.read_some(detail::asio::buffer(p, n), ec);
      if (!ec && r > 0) {
        count += static_cast<Count>(r);
        bytes_moved_ += r;
        l.heard = Clock::now();
        return true;
      }
      if (ec == detail::asio::error::interrupted) continue;
      if (!ec || detail::would_block(ec)) {
        l.parked = false;  // read dry: a read wait may be armed again
        return false;
      }
      const bool eof = ec == detail::asio::error::eof;
      if (eof && l.goodbye && !l.in_frame && l.begin == l.end) {
        l.eof = true;
        return false;
      }
      std::string what =
          peer_name(l.peer) + (eof || ec == detail::asio::error::connection_reset ? " closed the connection" : " failed");
      if (l.in_frame || l.begin != l.end) what += " in the middle of a frame";
      what += eof ? " (its process exited or was killed)" : " (" + ec.message() + ")";
      const bool needed = wanted(l);
      lose_peer(l, what, needed);
      return false;
    }
  }

  /// Reads and handles frames from `l` until its socket has nothing more, or, when `lazy`, until
  /// the operation in progress needs nothing more from it.
  void pump(Link& l, bool lazy) {
    while (l.open() && !l.eof) {
      if (lazy && !wanted(l)) return;
      if (!l.in_frame) {
        if (const std::size_t have = l.end - l.begin; have < wire::header_size) {
          // After a large frame the next is likely large too: read just its header, so that its
          // payload goes straight to its destination instead of through the link's buffer.
          if (!fill(l, l.large ? wire::header_size - have : detail::tcp_read_buffer)) return;
          continue;
        }
        start_frame(l);
        continue;
      }
      const std::uint64_t left = l.frame.payload_length - l.frame_done;
      if (const std::size_t avail = l.end - l.begin; avail > 0) {
        const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(avail, left));
        if (l.sink == Link::Sink::user) std::memcpy(l.user + l.frame_done, l.buffer.get() + l.begin, take);
        if (l.sink == Link::Sink::staging) std::memcpy(l.staging.get() + l.frame_done, l.buffer.get() + l.begin, take);
        l.begin += take;
        l.frame_done += take;
      } else if (left >= detail::tcp_read_buffer && l.sink != Link::Sink::discard) {
        std::byte* dst = (l.sink == Link::Sink::user ? l.user : l.staging.get()) + l.frame_done;
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, detail::tcp_read_quantum));
        if (!read_some(l, dst, n, l.frame_done)) return;
      } else {
        if (!fill(l)) return;
        continue;
      }
      if (l.frame_done == l.frame.payload_length) finish_frame(l);
    }
  }

  void start_frame(Link& l) {
    const auto d = wire::decode(std::span<const std::byte, wire::header_size>(l.buffer.get() + l.begin, wire::header_size));
    l.begin += wire::header_size;
    // Heartbeats are the transport's own, like the TCP acknowledgements: not counted as traffic.
    if (d.header.type != wire::FrameType::heartbeat) counters_.header_bytes_received += wire::header_size;
    if (auto problem = d.problem(); !problem.empty()) protocol_error(l, problem);
    const wire::Header& h = d.header;
    if (h.version != wire::protocol_version)
      protocol_error(l, "protocol version " + std::to_string(h.version) + ", this rank speaks version " +
                            std::to_string(wire::protocol_version));
    if (h.type != wire::FrameType::heartbeat) {
      if (h.sequence != l.recv_sequence)
        protocol_error(l, "frame number " + std::to_string(h.sequence) + " where " + std::to_string(l.recv_sequence) +
                              " was due (a frame was lost or repeated)");
      ++l.recv_sequence;
    }
    l.large = h.payload_length >= detail::tcp_read_buffer;
    l.frame = h;
    l.frame_done = 0;
    l.in_frame = true;
    l.sink = Link::Sink::staging;
    l.user = nullptr;
    switch (h.type) {
      case wire::FrameType::data: {
        detail::TcpPosted* p = posted_;
        if (p && !p->done && !p->adopted && (p->peer == l.peer || p->peer == detail::tcp_nobody) && p->tag == h.tag) {
          // Its receive is waiting: the length is checked against the receive's buffer, and the
          // payload goes straight there (or, of another size, is read and dropped).
          check_fingerprint(h.fingerprint, *p, l.peer);
          p->adopted = &l;
          if (h.payload_length == p->buffer.size()) {
            l.sink = Link::Sink::user;
            l.user = p->buffer.data();
          } else {
            // Of another size: read and dropped, then reported. A length beyond any message a peer
            // may send is a broken stream, not a message to wait for.
            if (h.payload_length > std::max<std::uint64_t>(options_.max_message_bytes, p->buffer.size()))
              protocol_error(l, "a message of " + std::to_string(h.payload_length) + " bytes (tag " +
                                    std::to_string(h.tag) + "), more than the limit of " +
                                    std::to_string(options_.max_message_bytes) + " bytes (TcpOptions::max_message_bytes)");
            l.sink = Link::Sink::discard;
            p->wrong_size = true;
            p->message_size = h.payload_length;
          }
        } else {
          if (h.payload_length > options_.max_message_bytes)
            protocol_error(l, "a message of " + std::to_string(h.payload_length) + " bytes (tag " +
                                  std::to_string(h.tag) + "), more than the " +
                                  std::to_string(options_.max_message_bytes) +
                                  " bytes a message without a posted receive may have (TcpOptions::max_message_bytes)");
          l.staging = std::make_unique_for_overwrite<std::byte[]>(static_cast<std::size_t>(h.payload_length));
        }
        break;
      }
      case wire::FrameType::barrier:
      case wire::FrameType::goodbye:
      case wire::FrameType::heartbeat:
        if (h.payload_length != 0)
          protocol_error(l, "a " + std::string(wire::type_name(h.type)) + " frame with a " +
                                std::to_string(h.payload_length) + "-byte payload");
        break;
      case wire::FrameType::abort:
        if (h.payload_length > wire::max_control_payload)
          protocol_error(l, "an abort frame of " + std::to_string(h.payload_length) + " bytes");
        counters_.header_bytes_received += h.payload_length;
        l.staging = std::make_unique_for_overwrite<std::byte[]>(static_cast<std::size_t>(h.payload_length));
        break;
      default:
        protocol_error(l, "an unexpected " + std::string(wire::type_name(h.type)) + " frame after the handshake");
    }
    if (h.payload_length == 0) finish_frame(l);
  }

  void finish_frame(Link& l) {
    l.in_frame = false;
    const wire::Header& h = l.frame;
    if ((h.flags & wire::header_flags::payload_crc) != 0 && l.sink != Link::Sink::discard) {
      const std::byte* got = l.sink == Link::Sink::user ? l.user : l.staging.get();
      if (auto problem = wire::payload_problem(h, {got, static_cast<std::size_t>(h.payload_length)}); !problem.empty())
        protocol_error(l, problem + " (tag " + std::to_string(h.tag) + ")");
    }
    switch (h.type) {
      case wire::FrameType::data:
        if (l.sink == Link::Sink::staging) {
          l.queue.push_back({h.tag, std::move(l.staging), static_cast<std::size_t>(h.payload_length), arrivals_++,
                             h.fingerprint});
        } else if (posted_ && posted_->adopted == &l) {
          received(*posted_, h.payload_length, l.peer);
        } else {
          // A wrong-sized message whose receive has given up (it timed out mid-frame): consumed.
          counters_.payload_bytes_received += h.payload_length;
          ++counters_.messages_received;
        }
        break;
      case wire::FrameType::barrier:
        l.tokens.push_back(std::uint64_t{h.aux} << 32 | h.tag);
        break;
      case wire::FrameType::goodbye:
        l.goodbye = true;
        break;
      case wire::FrameType::abort: {
        std::string reason(reinterpret_cast<const char*>(l.staging.get()), static_cast<std::size_t>(h.payload_length));
        // aux: the rank that failed first, which the sender may only be passing on.
        fail_link(l, reason.empty() ? peer_name(l.peer) + " failed" : reason, h.aux < size_ ? h.aux : l.peer);
      }
      default:
        break;
    }
    l.sink = Link::Sink::staging;
    l.user = nullptr;
    l.staging.reset();
  }

  /// Records that `p` got its message (of `size` bytes, from `from`).
  void received(detail::TcpPosted& p, std::uint64_t size, std::size_t from) {
    counters_.payload_bytes_received += size;
    ++counters_.messages_received;
    p.done = true;
    p.from = from;
    p.adopted = nullptr;
    if (size != p.buffer.size()) {
      p.wrong_size = true;
      p.message_size = size;
    }
  }

  /// Satisfies `p` from the messages that arrived before it, if one matches; else adopts a
  /// matching frame that is being read. Messages from one peer are matched in arrival order.
  void post(detail::TcpPosted& p) {
    std::deque<detail::TcpMessage>* best_queue = nullptr;
    std::deque<detail::TcpMessage>::iterator best;
    std::size_t best_from = detail::tcp_nobody;
    auto consider = [&](std::deque<detail::TcpMessage>& q, std::size_t from) {
      for (auto it = q.begin(); it != q.end(); ++it)
        if (it->tag == p.tag) {
          if (!best_queue || it->arrival < best->arrival) {
            best_queue = &q;
            best = it;
            best_from = from;
          }
          return;
        }
    };
    const bool any = p.peer == detail::tcp_nobody;
    if (any || p.peer == rank_) consider(self_queue_, rank_);
    for (auto& l : links_)
      if (l.peer != rank_ && (any || l.peer == p.peer)) consider(l.queue, l.peer);
    if (best_queue) {
      check_fingerprint(best->fingerprint, p, best_from);
      detail::TcpMessage m = std::move(*best);
      best_queue->erase(best);
      if (m.size == p.buffer.size() && m.size > 0) std::memcpy(p.buffer.data(), m.bytes.get(), m.size);
      received(p, m.size, best_from);
      return;
    }
    for (auto& l : links_) {
      if (l.peer == rank_ || !(any || l.peer == p.peer) || !l.in_frame) continue;
      if (l.frame.type != wire::FrameType::data || l.sink != Link::Sink::staging || l.frame.tag != p.tag) continue;
      check_fingerprint(l.frame.fingerprint, p, l.peer);
      p.adopted = &l;
      if (l.frame.payload_length == p.buffer.size()) {
        if (l.frame_done > 0) std::memcpy(p.buffer.data(), l.staging.get(), static_cast<std::size_t>(l.frame_done));
        l.sink = Link::Sink::user;
        l.user = p.buffer.data();
      } else {
        l.sink = Link::Sink::discard;
        p.wrong_size = true;
        p.message_size = l.frame.payload_length;
      }
      l.staging.reset();
      break;
    }
    posted_ = &p;
  }

  void check_size(const detail::TcpPosted& p) const {
    if (p.wrong_size)
      throw TransportError(who() + ": " + describe_op() + " expected " + std::to_string(p.buffer.size()) +
                           " bytes, the message" + (p.from != detail::tcp_nobody && op_.from == detail::tcp_nobody
                                                        ? " from rank " + std::to_string(p.from)
                                                        : std::string()) +
                           " has " + std::to_string(p.message_size));
  }

  // ---- the progress loop -----------------------------------------------------------------------
  /// Writes `outs` and reads what the operation waits for until `done()` and every frame of
  /// `outs` is written; TransportError at `until`. `waiting` says what is missing, for the timeout.
  template <class Done, class Waiting>
  void drive(std::span<detail::TcpOutgoing> outs, Done&& done, Waiting&& waiting, Clock::time_point until) {
    try {
      drive_loop(outs, done, waiting, until);
    } catch (const PeerLostError&) {
      if (survive_lost_peers_) finish_frames(outs, until);
      throw;
    }
  }

  /// After a lost peer failed an operation that the endpoint survives: writes the rest of every
  /// frame already partly written to a peer still there. Left half-written, it would make that
  /// connection unusable (its stream cannot carry another frame), and the peer still needed.
  /// The frames are written whole and never received (their operation has failed on both sides).
  void finish_frames(std::span<detail::TcpOutgoing> outs, Clock::time_point until) noexcept {
    std::vector<detail::TcpOutgoing> partial;
    for (const auto& o : outs)
      if (o.written > 0 && !o.done() && !o.link->lost && o.link->open()) partial.push_back(o);
    if (partial.empty()) return;
    // Nothing is received for the failed operation now: only written.
    detail::TcpPosted* const posted = std::exchange(posted_, nullptr);
    Link* const token = std::exchange(token_link_, nullptr);
    const bool goodbye = std::exchange(awaiting_goodbye_, false);
    for (std::size_t tries = 0; tries <= size_; ++tries) {  // each retry follows one more lost peer
      try {
        drive_loop(std::span<detail::TcpOutgoing>(partial), [] { return true; }, [] { return std::string(); }, until);
        break;
      } catch (const PeerLostError&) {
        continue;
      } catch (...) {  // timed out, or the endpoint failed: the frames stay half-written
        break;
      }
    }
    for (auto& o : outs)
      for (const auto& p : partial)
        if (p.link == o.link && p.header == o.header) o.written = p.written;
    posted_ = posted;
    token_link_ = token;
    awaiting_goodbye_ = goodbye;
  }

  template <class Done, class Waiting>
  void drive_loop(std::span<detail::TcpOutgoing> outs, Done&& done, Waiting&& waiting, Clock::time_point until) {
    bool eager = false;
    const auto watch_from = Clock::now();  // silence before this wait does not count against a peer
    // Retry without sleeping until then (TcpOptions::spin): the spin restarts whenever bytes move
    // either way, and after each wake-up, so a rank sleeps only once the sockets have been idle for
    // `spin`. (Sleeping in the middle of a transfer costs a wake-up per socket buffer, tens of
    // microseconds each on a virtual machine, where Open MPI never sleeps at all.)
    auto spin_until = watch_from + options_.spin;
    std::uint64_t moved = bytes_moved_;
    // While a receive is pending too, writes go in quanta between reads rather than all the socket
    // takes: both directions then flow at once, and what arrives is read while it is still in
    // cache. (A whole send buffer at a time, several MiB, leaves the received data waiting.)
    for (;;) {
      const bool reading = posted_ && !posted_->done;
      bool more = false;  // a socket took a whole quantum, and may take more at once
      for (auto& o : outs)
        if (!o.done() && !o.link->lost)
          more |= push(o, reading ? detail::tcp_send_quantum : static_cast<std::size_t>(-1)) && !o.done();
      for (auto& l : links_)
        if (l.open() && !l.eof && wanted(l)) pump(l, true);
      const bool written = std::all_of(outs.begin(), outs.end(), [](const auto& o) { return o.done() || o.link->lost; });
      if (written && done()) return;
      if (more) continue;
      const auto tried = Clock::now();
      if (bytes_moved_ != moved) {
        moved = bytes_moved_;
        spin_until = tried + options_.spin;
      }
      // (A wait whose bytes keep moving still ends at its deadline.)
      if (!eager && tried < spin_until && tried < until) {
        std::this_thread::yield();
        continue;
      }
      check_not_waiting_for_the_finished();
      check_stalled(outs, watch_from);
      const auto now = Clock::now();
      if (now >= until) {
        std::string what = waiting();
        for (const auto& o : outs)
          if (!o.done())
            what += (what.empty() ? "" : "; ") + std::to_string(o.written) + " of " + std::to_string(o.total()) +
                    " bytes written to " + peer_name(o.link->peer);
        throw TransportError(who() + ": " + describe_op() + " " + timeout_text() + (what.empty() ? "" : ": " + what));
      }
      // Wait: a write wait on each link with a frame to finish, a read wait on every open link
      // (they stay armed until they complete, across iterations and operations). Links this
      // operation does not need complete theirs on data too; only their hang-up or failure is
      // acted on at once (below), or everything once the loop has stalled.
      for (auto& l : links_) {
        if (!l.open() || l.eof) continue;
        for (const auto& o : outs)
          if (o.link == &l && !o.done() && !l.lost) l.arm(detail::asio::socket_base::wait_write);
        if (!l.parked || eager || wanted(l)) l.arm(detail::asio::socket_base::wait_read);
      }
      if (accept_rejoins_) rejoin_listener_->arm();
      detail::TcpReactor& r = *reactor_;
      const std::uint64_t seen = r.events;
      // Wake up at least once a heartbeat interval, to see whether a peer has gone silent.
      const auto stall = std::min({until, Clock::now() + (eager ? options_.heartbeat_interval : detail::tcp_stall)});
      detail::run_until(r.io, [&] { return r.events != seen; }, stall);
      if (rejoin_listener_ && std::exchange(rejoin_listener_->fired, false)) {
        accept_rejoin();
        continue;
      }
      if (r.events == seen) {
        // Nothing armed (every link closed or ended): nothing can happen before `stall`.
        if (Clock::now() < stall) std::this_thread::sleep_until(stall);
        // No progress for a while: read everything, whoever it is for.
        if (!eager)
          for (auto& l : links_)
            if (l.open() && !l.eof && l.parked && !wanted(l)) pump(l, false);
        eager = true;
        continue;
      }
      spin_until = Clock::now() + options_.spin;
      for (auto& l : links_) {
        if (!std::exchange(l.read_fired, false) || !l.open() || l.eof) continue;
        if (l.wait_error == detail::asio::error::bad_descriptor)
          fail_link(l, "the socket to " + peer_name(l.peer) + " was closed underneath the transport", rank_);
        // Wanted links are read at the top of the loop; the others only when they hang up or
        // fail (readable with nothing to read: to report it at once), or when the loop has
        // stalled. Data that merely arrived waits in the kernel, the link parked until then.
        if (wanted(l)) continue;
        detail::ErrorCode ec;
        if (eager || l.socket.available(ec) == 0 || ec)
          pump(l, false);
        else
          l.parked = true;
      }
    }
  }

  /// Fails with PeerLostError when a peer this wait needs has sent nothing, not even a heartbeat,
  /// for the stall limit (counted from `watch_from` at the earliest).
  void check_stalled(std::span<const detail::TcpOutgoing> outs, Clock::time_point watch_from) {
    const auto limit = options_.stall_limit();
    auto silent = [&](const Link& l) { return Clock::now() - std::max(l.heard, watch_from) > limit; };
    for (auto& l : links_) {
      if (!l.open() || l.eof || l.goodbye || l.peer == rank_) continue;
      bool waits = wanted(l) || (survive_lost_peers_ && stop_on_any_loss_);
      for (const auto& o : outs) waits = waits || (o.link == &l && !o.done());
      if (!waits || !silent(l)) continue;
      pump(l, false);  // a heartbeat may be waiting in the kernel, read or not
      if (!l.open() || !silent(l)) continue;
      lose_peer(l, peer_name(l.peer) + " has sent nothing, not even a heartbeat, for " +
                       std::to_string(limit.count()) + " ms (heartbeats every " +
                       std::to_string(options_.heartbeat_interval.count()) +
                       " ms): it is stalled (stopped, hung, or its machine unreachable)",
                true);
    }
  }

  /// A peer that has said goodbye sends nothing more: waiting for it would only end in a timeout.
  /// (An error of the program's, not of the connections: the endpoint stays usable.)
  void check_not_waiting_for_the_finished() const {
    auto finished = [](const Link& l) { return (l.goodbye && !l.in_frame) || l.lost; };
    std::string why;
    if (posted_ && !posted_->done && !posted_->adopted && posted_->peer != detail::tcp_nobody &&
        links_[posted_->peer].lost)
      throw PeerLostError(who() + ": " + describe_op() + " failed: " + peer_name(posted_->peer) +
                              " was lost earlier (it died or stalled)",
                          posted_->peer);
    if (posted_ && !posted_->done && !posted_->adopted) {
      if (posted_->peer != detail::tcp_nobody && finished(links_[posted_->peer]))
        why = peer_name(posted_->peer) + " has finished (it said goodbye) and will send nothing more";
      if (posted_->peer == detail::tcp_nobody &&
          std::all_of(links_.begin(), links_.end(), [&](const Link& l) { return l.peer == rank_ || finished(l); }))
        why = "every other rank has finished (said goodbye) or was lost, and will send nothing more";
    }
    if (token_link_ && wanted(*token_link_) && finished(*token_link_))
      why = peer_name(token_link_->peer) + " has finished (it said goodbye) and will not enter the barrier";
    if (!why.empty()) throw TransportError(who() + ": " + describe_op() + " failed: " + why);
  }

  std::string waiting_for_posted(const detail::TcpPosted& p) const {
    if (p.done) return {};
    if (p.adopted) {
      const Link& l = *p.adopted;
      return std::to_string(l.frame_done) + " of " + std::to_string(l.frame.payload_length) +
             " bytes of the message received from " + peer_name(l.peer);
    }
    return p.peer == detail::tcp_nobody ? "no message with this tag arrived" : "nothing arrived from " + peer_name(p.peer);
  }

  /// An operation in progress. It owns the operation's receive and frames, and is declared
  /// first, so that its end, also by an exception, comes after everything that uses them: a
  /// receive must not be left pointing at a buffer its caller is about to free, and a frame left
  /// half-written makes its link unusable.
  struct Scope {
    TcpEndpoint& e;
    detail::TcpPosted recv{};
    bool posted = false;
    detail::TcpOutgoing one{};
    std::vector<detail::TcpOutgoing> many;
    std::span<detail::TcpOutgoing> outs;

    Scope(TcpEndpoint& ep, detail::TcpOp op) : e(ep) { e.begin(op); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope() {
      if (posted && recv.adopted && !recv.done) {
        Link& l = *recv.adopted;
        if (l.in_frame && l.sink == Link::Sink::user) {
          // Read on into memory of the message's own; a later recv takes it from there.
          try {
            l.staging = std::make_unique_for_overwrite<std::byte[]>(static_cast<std::size_t>(l.frame.payload_length));
            if (l.frame_done > 0) std::memcpy(l.staging.get(), l.user, static_cast<std::size_t>(l.frame_done));
            l.sink = Link::Sink::staging;
          } catch (...) {  // no memory for it: the stream cannot be resumed
            l.close();
            if (e.broken_.empty()) e.broken_ = "no memory to keep a message from " + e.peer_name(l.peer);
          }
          l.user = nullptr;
        }
      }
      e.posted_ = nullptr;
      e.token_link_ = nullptr;
      e.awaiting_goodbye_ = false;
      for (auto& o : outs) {
        if (o.done()) continue;
        if (o.written == 0)
          --o.link->send_sequence;  // it never left: the stream is intact
        else
          o.link->send_broken = true;
      }
    }

    /// Posts the receive of (peer, tag) into `buffer` (peer tcp_nobody: any peer).
    detail::TcpPosted& post(std::size_t peer, Tag tag, std::span<std::byte> buffer) {
      recv.peer = peer;
      recv.tag = tag;
      recv.buffer = buffer;
      recv.fingerprint = e.current_fingerprint(tag);
      posted = true;
      e.post(recv);
      return recv;
    }
    /// The one frame of this operation.
    std::span<detail::TcpOutgoing> out(detail::TcpOutgoing o) {
      one = o;
      outs = {&one, 1};
      return outs;
    }
  };

  TcpOptions options_;
  std::size_t rank_ = 0, size_ = 1;
  // The io_context of every link's socket. Each link holds it too, so that it outlives them. The
  // links' armed waits point at them: the vector is never resized, and moving it moves no link.
  std::shared_ptr<detail::TcpReactor> reactor_;
  std::vector<Link> links_;  // by peer rank; links_[rank_] is unused
  std::vector<std::string> addresses_;
  std::deque<detail::TcpMessage> self_queue_;  // messages this rank sent itself
  TrafficCounters counters_{};
  std::uint64_t bytes_moved_ = 0;  // read or written on any socket, frames and heartbeats alike
  std::uint64_t arrivals_ = 0;
  std::uint32_t barrier_epoch_ = 0;
  std::string broken_;  // why the endpoint cannot be used any more
  std::size_t culprit_ = detail::tcp_nobody;  // whose failure that is
  bool closed_ = false;
  // The operation in progress.
  detail::TcpPosted* posted_ = nullptr;
  Link* token_link_ = nullptr;
  std::uint64_t token_key_ = 0;
  bool awaiting_goodbye_ = false;
  struct OpTrack {
    std::uint32_t rounds = 0;     // calls declared on the tag so far
    std::uint64_t current = 0;    // the fingerprint of the one in progress, 0 when none
  };
  std::unordered_map<Tag, OpTrack> ops_;
  bool survive_lost_peers_ = false;
  bool stop_on_any_loss_ = false;
  std::uint64_t job_id_ = 0;
  std::unique_ptr<detail::TcpRejoinListener> rejoin_listener_;
  bool accept_rejoins_ = false;
  bool rejoined_ = false;
  std::unique_ptr<detail::SharedMemoryAllreduce> shared_memory_;
  std::size_t ranks_on_host_ = 1;
  // Last: stopped before anything it reads (the links' send guards, which it shares) goes.
  std::unique_ptr<detail::TcpHeartbeat> heartbeat_;

  void negotiate_shared_memory();
  /// Whether every peer reached rank 0 from this host (over loopback, or from rank 0's own address).
  bool peers_on_this_host() const;
  /// Whether `l` is an open connection to another rank.
  bool open_peer_link(const detail::TcpLink& l) const noexcept {
    return l.peer != rank_ && l.peer != detail::tcp_nobody && l.open();
  }
  /// Whether an open peer link comes from this host (over loopback, or from this rank's own
  /// address); false when the addresses cannot be read.
  bool link_on_this_host(const detail::TcpLink& l) const;
  std::optional<std::size_t> hung_up_peer() noexcept;
};

// ---- operations ------------------------------------------------------------------------------

inline void TcpEndpoint::send(std::size_t peer, Tag tag, std::span<const std::byte> bytes) {
  Scope scope(*this, {"send", peer, detail::tcp_nobody, tag, true});
  if (peer == rank_) {
    detail::TcpMessage m{tag, std::make_unique_for_overwrite<std::byte[]>(bytes.size()), bytes.size(), arrivals_++};
    if (!bytes.empty()) std::memcpy(m.bytes.get(), bytes.data(), bytes.size());
    self_queue_.push_back(std::move(m));
  } else {
    drive(scope.out(frame(link(peer), wire::FrameType::data, tag, 0, bytes)), [] { return true; },
          [] { return std::string(); }, deadline());
    counters_.header_bytes_sent += wire::header_size;
  }
  counters_.payload_bytes_sent += bytes.size();
  ++counters_.messages_sent;
}

inline void TcpEndpoint::recv(std::size_t peer, Tag tag, std::span<std::byte> buffer) {
  Scope scope(*this, {"recv", detail::tcp_nobody, peer, tag, true});
  detail::TcpPosted& p = scope.post(peer, tag, buffer);
  if (!p.done) {
    if (peer == rank_)
      throw TransportError(who() + ": " + describe_op() + ": no such message was sent, and none can be while this rank waits");
    drive({}, [&] { return p.done; }, [&] { return waiting_for_posted(p); }, deadline());
  }
  check_size(p);
}

inline std::size_t TcpEndpoint::recv_any(Tag tag, std::span<std::byte> buffer) {
  Scope scope(*this, {"recv_any", detail::tcp_nobody, detail::tcp_nobody, tag, true});
  detail::TcpPosted& p = scope.post(detail::tcp_nobody, tag, buffer);
  if (!p.done) {
    if (size_ == 1)
      throw TransportError(who() + ": " + describe_op() + ": no such message was sent, and none can be while this rank waits");
    drive({}, [&] { return p.done; }, [&] { return waiting_for_posted(p); }, deadline());
  }
  check_size(p);
  return p.from;
}

inline void TcpEndpoint::sendrecv(std::size_t to, Tag tag, std::span<const std::byte> out, std::size_t from,
                                  std::span<std::byte> in) {
  if (to == rank_ || from == rank_) {
    // Sending to itself never waits, and a receive from itself can only take what is queued:
    // one after the other is all there is to it.
    send(to, tag, out);
    recv(from, tag, in);
    return;
  }
  Scope scope(*this, {"sendrecv", to, from, tag, true});
  // The receive first, so that the message can go straight into `in` while `out` is written.
  detail::TcpPosted& p = scope.post(from, tag, in);
  drive(scope.out(frame(link(to), wire::FrameType::data, tag, 0, out)), [&] { return p.done; },
        [&] { return waiting_for_posted(p); }, deadline());
  counters_.header_bytes_sent += wire::header_size;
  counters_.payload_bytes_sent += out.size();
  ++counters_.messages_sent;
  check_size(p);
}

inline void TcpEndpoint::barrier() {
  // Dissemination barrier: in round k each rank signals rank + 2^k and waits for rank - 2^k; after
  // ceil(log2 n) rounds every rank has heard, indirectly, from every other. Tokens carry the
  // barrier's epoch, so that a fast rank's token for the next barrier is not taken for this one.
  Scope scope(*this, {"barrier", detail::tcp_nobody, detail::tcp_nobody, 0, false});
  if (size_ == 1) return;
  const std::uint32_t epoch = ++barrier_epoch_;
  const auto until = deadline();
  std::uint32_t round = 0;
  for (std::size_t dist = 1; dist < size_; dist *= 2, ++round) {
    const std::size_t to = (rank_ + dist) % size_, from = (rank_ + size_ - dist) % size_;
    Link& src = links_[from];
    token_link_ = &src;
    token_key_ = std::uint64_t{epoch} << 32 | round;
    drive(scope.out(frame(link(to), wire::FrameType::barrier, round, epoch, {})), [&] { return !wanted(src); },
          [&] { return "waiting for " + peer_name(from) + " (round " + std::to_string(round) + ")"; }, until);
    src.tokens.erase(std::find(src.tokens.begin(), src.tokens.end(), token_key_));
    token_link_ = nullptr;
    scope.outs = {};
    counters_.header_bytes_sent += wire::header_size;
  }
}

inline void TcpEndpoint::close() {
  if (closed_) return;
  // A rank let in now would be waited on for a goodbye it does not know to send.
  accept_rejoins_ = false;
  Scope scope(*this, {"shutdown", detail::tcp_nobody, detail::tcp_nobody, 0, false});
  for (std::size_t p = 0; p < size_; ++p)
    if (p != rank_ && !links_[p].lost) scope.many.push_back(frame(link(p), wire::FrameType::goodbye, 0, 0, {}));
  scope.outs = scope.many;
  awaiting_goodbye_ = true;
  const auto until = deadline();
  for (;;) {
    try {
      drive(
          scope.outs, [&] { return std::none_of(links_.begin(), links_.end(), [&](const Link& l) { return wanted(l); }); },
          [&] {
            std::string missing;
            for (const auto& l : links_)
              if (l.peer != rank_ && !l.goodbye && !l.lost) missing += (missing.empty() ? "" : ", ") + peer_name(l.peer);
            return "no goodbye from " + missing + " (still busy, or stuck)";
          },
          until);
      break;
    } catch (const PeerLostError&) {
      if (!survive_lost_peers_) throw;  // else: the others' goodbyes are still due
    }
  }
  counters_.header_bytes_sent += wire::header_size * scope.many.size();
  scope.outs = {};
  // Every peer has sent its last frame, and this rank has read up to it: the sockets are drained,
  // so closing sends a clean FIN, never a reset that could destroy data a peer has yet to read.
  for (auto& l : links_) {
    l.queue.clear();
    l.close();
  }
  self_queue_.clear();
  closed_ = true;
  heartbeat_.reset();
}

inline void TcpEndpoint::abort(std::string_view reason) noexcept {
  if (closed_) return;
  closed_ = true;
  try {
    // Pass on the first failure when this one came from a peer: every rank then names the rank
    // that failed first, not the one that happened to tell it.
    const bool passed_on = !broken_.empty() && culprit_ != rank_;
    const std::string why = passed_on ? broken_ : std::string(reason.substr(0, wire::max_control_payload));
    const auto culprit = static_cast<std::uint32_t>(passed_on ? culprit_ : rank_);
    const std::span<const std::byte> payload(reinterpret_cast<const std::byte*>(why.data()), why.size());
    std::vector<detail::TcpOutgoing> outs;
    for (auto& l : links_)
      if (l.open() && !l.send_broken) outs.push_back(frame(l, wire::FrameType::abort, 0, culprit, payload));
    // Best effort, briefly: a peer that does not read will learn from the closed connection.
    const auto until = Clock::now() + std::min<Clock::duration>(options_.timeout, std::chrono::milliseconds(500));
    detail::TcpReactor& r = *reactor_;
    for (;;) {
      bool waiting = false;
      for (auto& o : outs) {
        if (o.done() || !o.link->open()) continue;
        try {
          push(o);
        } catch (...) {
          o.link->close();
          continue;
        }
        if (!o.done()) {
          o.link->arm(detail::asio::socket_base::wait_write);
          waiting = true;
        }
      }
      if (!waiting || Clock::now() >= until) break;
      const std::uint64_t seen = r.events;
      detail::run_until(r.io, [&] { return r.events != seen; }, until);
    }
  } catch (...) {
  }
  for (auto& l : links_) {
    if (!l.open()) continue;
    // Read what is pending, so that closing sends a FIN rather than a reset (a reset can make the
    // peer lose the abort frame before it reads it).
    std::byte sink[4096];
    detail::ErrorCode ec;
    while (l.socket.read_some(detail::asio::buffer(sink), ec) > 0 && !ec) {
    }
    l.socket.shutdown(detail::asio::socket_base::shutdown_send, ec);
    l.close();
  }
  heartbeat_.reset();
}

// ---- rendezvous ------------------------------------------------------------------------------

namespace detail {

struct TcpControlFrame {
  wire::Decoded decoded;
  std::vector<std::byte> payload;
  const wire::Header& header() const noexcept { return decoded.header; }
};

/// One line to TcpOptions::log, or to stderr when it is not set.
inline void tcp_log(const TcpOptions& o, const std::string& line) {
  if (o.log) {
    o.log(line);
  } else {
    std::fprintf(stderr, "flotilla: %s\n", line.c_str());
    std::fflush(stderr);
  }
}

/// The handshake runs before the endpoint exists, one connection at a time, with blocking-style
/// helpers over the non-blocking sockets (each a wait_ready() on the io_context that the endpoint
/// then takes over, bounded by the rendezvous deadline).
class TcpRendezvous {
 public:
  explicit TcpRendezvous(const TcpOptions& o)
      : o_(o), n_(o.world_size), r_(o.rank), until_(Clock::now() + o.connect_timeout),
        reactor_(std::make_shared<TcpReactor>()), addresses_(o.world_size) {
    links_.reserve(n_);
    for (std::size_t p = 0; p < n_; ++p) {
      links_.emplace_back(reactor_);
      links_[p].peer = p;
    }
  }

  /// For one rejoining rank's handshake on a running endpoint's reactor (TcpEndpoint::accept_rejoin).
  TcpRendezvous(const TcpOptions& o, std::shared_ptr<TcpReactor> reactor, std::uint64_t job_id)
      : o_(o), n_(o.world_size), r_(o.rank), until_(Clock::now() + handshake_limit), reactor_(std::move(reactor)),
        job_id_(job_id), addresses_(o.world_size), phase_("accepting a rejoining rank"), going_on_("going on") {}

  std::shared_ptr<TcpReactor> reactor() const { return reactor_; }
  std::uint64_t job_id() const noexcept { return job_id_; }
  /// The listener of a rank but 0, kept to accept a lost rank that rejoins.
  std::optional<Listener> listener() { return std::move(listener_); }
  std::vector<TcpLink> links() { return std::move(links_); }
  std::vector<std::string> addresses() { return std::move(addresses_); }
  TrafficCounters counters() const { return counters_; }

  void run() {
    if (n_ == 1) {
      addresses_[0] = "(this process)";
      return;
    }
    coordinator_ = *parse_host_port(o_.coordinator);
    addresses_[0] = format_host_port(coordinator_);
    try {
      if (!o_.rejoin.empty())
        rejoin_running_job();
      else if (r_ == 0)
        coordinate();
      else
        join();
    } catch (const TransportError& e) {
      // The ranks already connected wait for this one: tell them why it gave up, so that they
      // fail at once with the cause rather than with a closed connection or a timeout.
      const std::string why = e.what();
      const std::span<const std::byte> text(reinterpret_cast<const std::byte*>(why.data()), why.size());
      for (auto& l : links_) {
        if (!l.open()) continue;
        try {
          send_frame(l, wire::FrameType::abort, text, "a peer");
        } catch (...) {
        }
      }
      throw;
    }
  }

 private:
  friend class ::flotilla::transport::TcpEndpoint;

  std::string who() const { return "tcp rank " + std::to_string(r_) + " of " + std::to_string(n_); }
  std::string connect_text() const { return std::to_string(o_.connect_timeout.count()) + " ms"; }
  [[noreturn]] void fail(const std::string& what) const { throw TransportError(who() + ": " + phase_ + ": " + what); }

  void write_all(TcpLink& l, std::span<const std::byte> a, std::span<const std::byte> b, const std::string& peer) {
    std::size_t done = 0;
    const std::size_t total = a.size() + b.size();
    while (done < total) {
      std::array<asio::const_buffer, 2> bufs;
      std::size_t n = 0;
      if (done < a.size()) bufs[n++] = asio::buffer(a.data() + done, a.size() - done);
      const std::size_t off = done > a.size() ? done - a.size() : 0;
      if (off < b.size()) bufs[n++] = asio::buffer(b.data() + off, b.size() - off);
      ErrorCode ec;
      const std::size_t r = l.socket.write_some(std::span<const asio::const_buffer>(bufs.data(), n), ec);
      if (!ec && r > 0) {
        done += r;
        continue;
      }
      if (ec == asio::error::interrupted) continue;
      if (!ec || would_block(ec)) {
        if (!wait_ready(reactor_->io, l.socket, asio::socket_base::wait_write, io_until()))
          fail("writing to " + peer + " timed out" + timed_out_text());
        continue;
      }
      fail("writing to " + peer + " failed: " + ec.message());
    }
    counters_.header_bytes_sent += total;  // handshake frames are all framing, no payload
  }

  void send_frame(TcpLink& l, wire::FrameType type, std::span<const std::byte> payload, const std::string& peer) {
    wire::Header h;
    h.type = type;
    h.sequence = l.send_sequence++;
    h.payload_length = payload.size();
    wire::seal_payload(h, payload);
    const auto hdr = wire::encode(h);
    write_all(l, hdr, payload, peer);
  }

  void read_exact(TcpLink& l, std::byte* p, std::size_t n, const std::string& peer, const std::string& waiting) {
    while (n > 0) {
      ErrorCode ec;
      const std::size_t r = l.socket.read_some(asio::buffer(p, n), ec);
      if (!ec && r > 0) {
        p += r;
        n -= r;
        continue;
      }
      if (ec == asio::error::interrupted) continue;
      if (!ec || would_block(ec)) {
        if (!wait_ready(reactor_->io, l.socket, asio::socket_base::wait_read, io_until()))
          fail(waiting + ": timed out" + timed_out_text());
        continue;
      }
      fail(waiting + ": " + peer + (ec == asio::error::eof ? " closed the connection" : " failed: " + ec.message()));
    }
  }

  /// Reads one control frame. Bad magic, CRC or type, or a payload larger than control frames
  /// have, end the rendezvous here (before the payload is allocated). The version is left to the
  /// caller, which refuses a peer of another version with both numbers.
  TcpControlFrame read_frame(TcpLink& l, const std::string& peer, const std::string& waiting) {
    wire::HeaderBytes hb;
    read_exact(l, hb.data(), hb.size(), peer, waiting);
    TcpControlFrame f;
    f.decoded = wire::decode(hb);
    counters_.header_bytes_received += wire::header_size;
    if (auto problem = f.decoded.problem(); !problem.empty())
      fail(waiting + ": " + peer + " sent a bad frame: " + problem + "; connection closed");
    const wire::Header& h = f.header();
    if (h.payload_length > wire::max_control_payload)
      fail(waiting + ": " + peer + " sent a bad frame: a " + std::string(wire::type_name(h.type)) + " frame of " +
           std::to_string(h.payload_length) + " bytes (at most " + std::to_string(wire::max_control_payload) +
           "); connection closed");
    if (h.version == wire::protocol_version) {
      if (h.sequence != l.recv_sequence)
        fail(waiting + ": " + peer + " sent a bad frame: frame number " + std::to_string(h.sequence) + " where " +
             std::to_string(l.recv_sequence) + " was due; connection closed");
      ++l.recv_sequence;
    }
    f.payload.resize(static_cast<std::size_t>(h.payload_length));
    read_exact(l, f.payload.data(), f.payload.size(), peer, waiting);
    counters_.header_bytes_received += f.payload.size();
    if (auto problem = wire::payload_problem(h, f.payload); !problem.empty())
      fail(waiting + ": " + peer + " sent a bad frame: " + problem + "; connection closed");
    return f;
  }

  static std::string text_of(const std::vector<std::byte>& payload) {
    return std::string(reinterpret_cast<const char*>(payload.data()), payload.size());
  }

  /// Checks a hello (or the refusal or abort in its place) from `peer`; returns it, or the reason
  /// to refuse it. A refusal or an abort received ends the rendezvous with its reason.
  std::optional<wire::Hello> check_hello(const TcpControlFrame& f, const std::string& peer, const std::string& waiting,
                                         std::string& refusal) {
    const wire::Header& h = f.header();
    if (h.type == wire::FrameType::refuse) fail(waiting + ": " + peer + " refused this rank: " + text_of(f.payload));
    if (h.type == wire::FrameType::abort) fail(waiting + ": " + peer + " gave up: " + text_of(f.payload));
    if (h.version != wire::protocol_version) {
      refusal = "protocol version mismatch: " + peer + " speaks version " + std::to_string(h.version) + ", " + who() +
                " speaks version " + std::to_string(wire::protocol_version) + " (are all ranks the same build?)";
      return std::nullopt;
    }
    if (h.type != wire::FrameType::hello) {
      refusal = peer + " sent a " + std::string(wire::type_name(h.type)) + " frame where a hello was due";
      return std::nullopt;
    }
    auto hello = wire::decode_hello(f.payload);
    if (!hello) {
      refusal = peer + " sent a malformed hello";
      return std::nullopt;
    }
    const bool mine = !o_.secret.empty();
    if (hello->auth != (mine ? 1 : 0)) {
      refusal = mine ? "authentication required: " + peer + " has no shared secret, " + who() +
                           " has one (set the same FLOTILLA_SECRET or FLOTILLA_SECRET_FILE on every rank)"
                     : "authentication mismatch: " + peer + " has a shared secret, " + who() +
                           " has none (set the same FLOTILLA_SECRET or FLOTILLA_SECRET_FILE on every rank)";
      return std::nullopt;
    }
    return hello;
  }

  /// The world size is checked only once the peer is authenticated: a stranger's claim of another
  /// size must not end the job.
  std::string check_world_size(const wire::Hello& hello, const std::string& peer) const {
    if (hello.world_size == n_) return {};
    return "world size mismatch: " + peer + " (rank " + std::to_string(hello.rank) + ") was started with world size " +
           std::to_string(hello.world_size) + ", " + who() + " with world size " + std::to_string(n_) +
           " (FLOTILLA_WORLD_SIZE)";
  }

  /// Tells `l`'s peer why it is refused (best effort), and ends the rendezvous with the reason
  /// (run() tells the ranks already connected).
  [[noreturn]] void refuse(TcpLink& l, const std::string& reason) {
    tell_refused(l, reason);
    fail(reason);
  }
  void tell_refused(TcpLink& l, const std::string& reason) {
    const std::span<const std::byte> text(reinterpret_cast<const std::byte*>(reason.data()), reason.size());
    try {
      send_frame(l, wire::FrameType::refuse, text, "the refused peer");
    } catch (...) {
    }
  }

  void log(const std::string& line) const { tcp_log(o_, line); }

  /// A hello of this rank's for one connection: a fresh nonce each time.
  std::vector<std::byte> hello_payload(std::uint16_t port, const std::string& host) const {
    wire::Hello h;
    h.world_size = static_cast<std::uint32_t>(n_);
    h.rank = static_cast<std::uint32_t>(r_);
    h.job_id = job_id_;
    h.listen_port = port;
    h.listen_host = host;
    h.auth = o_.secret.empty() ? 0 : 1;
    std::random_device rd;
    for (std::size_t i = 0; i < h.nonce.size(); i += 4) {
      const std::uint32_t v = rd();
      for (std::size_t k = 0; k < 4; ++k) h.nonce[i + k] = static_cast<std::uint8_t>(v >> (8 * k));
    }
    return wire::encode_hello(h);
  }

  std::span<const std::byte> proof_bytes(const Sha256::Digest& d) const {
    return {reinterpret_cast<const std::byte*>(d.data()), d.size()};
  }

  /// The client's side of a connection's handshake, after its hello went out: reads the server's
  /// hello (and proof), checks it, and proves this rank's secret. Any failure ends the rendezvous.
  wire::Hello client_handshake(TcpLink& l, std::span<const std::byte> sent, const std::string& peer,
                               const std::string& waiting) {
    std::string refusal;
    const auto reply = read_frame(l, peer, waiting);
    auto hello = check_hello(reply, peer, waiting, refusal);
    if (hello && refusal.empty()) refusal = check_world_size(*hello, peer);
    if (!hello || !refusal.empty()) refuse(l, refusal);
    if (!o_.secret.empty()) {
      const auto f = read_frame(l, peer, waiting + " (authentication)");
      if (f.header().type == wire::FrameType::refuse) fail(waiting + ": " + peer + " refused this rank: " + text_of(f.payload));
      if (f.header().type != wire::FrameType::auth || f.header().version != wire::protocol_version ||
          !wire::proof_matches(f.payload, wire::auth_proof(o_.secret, wire::Role::server, sent, reply.payload)))
        refuse(l, "authentication failed: " + peer +
                      " does not know this job's shared secret (is FLOTILLA_SECRET the same on every rank?)");
      send_frame(l, wire::FrameType::auth, proof_bytes(wire::auth_proof(o_.secret, wire::Role::client, sent, reply.payload)),
                 peer);
    }
    return *hello;
  }

  /// A connection from a rank, accepted and authenticated during the rendezvous, with its hello.
  struct Arrival {
    TcpLink link;
    std::string peer;  ///< "a connection from host:port"
    wire::Hello hello;
  };

  /// How long one accepted connection may take to complete its handshake: a connection that says
  /// nothing must not hold up the ranks behind it for the whole rendezvous.
  static constexpr std::chrono::milliseconds handshake_limit{5000};

  /// Waits until `until_` for the next connection on `listener`, then runs the server's side of
  /// its handshake, answering with `reply` (this rank's hello payload: `doing` names the step in
  /// messages: "registering", "accepting"). A connection that is malformed, of another protocol
  /// version, unauthenticated or too slow is dropped and logged (told why, when it is a flotilla
  /// peer), and this returns empty: the rendezvous goes on with the others. On the deadline, fails
  /// with `timed_out(missing)`, where `missing` lists ranks 1 to `below` - 1 that have no link yet.
  template <class Reply, class TimedOut>
  std::optional<Arrival> accept_hello(Listener& listener, std::string_view doing, std::size_t below, Reply&& reply,
                                      TimedOut&& timed_out) {
    if (!wait_ready(reactor_->io, listener.acceptor, asio::socket_base::wait_read, until_)) {
      std::string missing;
      for (std::size_t p = 1; p < below; ++p)
        if (!links_[p].open()) missing += (missing.empty() ? "" : ", ") + std::to_string(p);
      fail(timed_out(missing));
    }
    auto incoming = accept_one(listener.acceptor);
    if (!incoming) return std::nullopt;
    Arrival a{TcpLink(reactor_), {}, {}};
    a.link.socket = std::move(*incoming);
    tune_socket(a.link.socket, 0);
    a.peer = "a connection from " + format_host_port(remote_host_port(a.link.socket));
    const std::string waiting = std::string(doing) + " " + a.peer;
    conn_until_ = Clock::now() + handshake_limit;
    struct Reset {
      Clock::time_point& t;
      ~Reset() { t = Clock::time_point::max(); }
    } reset{conn_until_};
    std::string refusal;
    try {
      const auto f = read_frame(a.link, a.peer, waiting);
      if (f.header().type == wire::FrameType::refuse || f.header().type == wire::FrameType::abort) {
        refusal = a.peer + " sent a " + std::string(wire::type_name(f.header().type)) + " frame where a hello was due";
      } else if (auto hello = check_hello(f, a.peer, waiting, refusal)) {
        const auto answer = reply();
        send_frame(a.link, wire::FrameType::hello, answer, a.peer);
        if (!o_.secret.empty()) {
          send_frame(a.link, wire::FrameType::auth,
                     proof_bytes(wire::auth_proof(o_.secret, wire::Role::server, f.payload, answer)), a.peer);
          const auto proof = read_frame(a.link, a.peer, waiting + " (authentication)");
          if (proof.header().type != wire::FrameType::auth || proof.header().version != wire::protocol_version ||
              !wire::proof_matches(proof.payload, wire::auth_proof(o_.secret, wire::Role::client, f.payload, answer)))
            refusal = "authentication failed: " + a.peer +
                      " does not know this job's shared secret (is FLOTILLA_SECRET the same on every rank?)";
        }
        if (refusal.empty()) {
          a.hello = *hello;
          return a;
        }
      }
    } catch (const TransportError& e) {
      // A peer that breaks the protocol is dropped, not allowed to end the job. (Its message
      // already names this rank and the connection.)
      log(std::string(e.what()) + "; dropped it, " + going_on_);
      return std::nullopt;
    }
    tell_refused(a.link, refusal);
    log(who() + ": " + phase_ + ": refused " + a.peer + ": " + refusal + "; dropped it, " + going_on_);
    return std::nullopt;
  }

  // Rank 0: accepts every other rank's registration, then sends each the table.
  void coordinate() {
    Listener listener = listen_on(reactor_->io, coordinator_.host, coordinator_.port, o_.socket_buffer_bytes,
                                  who() + ": cannot start the coordinator (FLOTILLA_COORDINATOR)");
    std::random_device rd;
    while (job_id_ == 0) job_id_ = (std::uint64_t{rd()} << 32) ^ rd();
    wire::Table table;
    table.job_id = job_id_;
    table.entries.resize(n_);
    table.entries[0] = {coordinator_.host, coordinator_.port};
    std::size_t registered = 0;
    while (registered < n_ - 1) {
      auto arrival = accept_hello(
          listener, "registering", n_, [&] { return hello_payload(coordinator_.port, coordinator_.host); },
          [&](const std::string& missing) {
            return "timed out after " + connect_text() + " at the coordinator " + addresses_[0] + ": rank(s) " +
                   missing + " did not register (were they started, with FLOTILLA_COORDINATOR=" + addresses_[0] + "?)";
          });
      if (!arrival) continue;
      TcpLink& c = arrival->link;
      const std::string& peer = arrival->peer;
      const auto& hello = arrival->hello;
      // Authenticated (or on loopback without a secret): a disagreement now is a misconfigured
      // job, and ends it.
      std::string refusal = check_world_size(hello, peer);
      if (!refusal.empty()) {
      } else if (hello.rank == 0 || hello.rank >= n_) {
        refusal = peer + " claims rank " + std::to_string(hello.rank) +
                  ", but rank 0 is the coordinator and the job has ranks 0 to " + std::to_string(n_ - 1);
      } else if (links_[hello.rank].open()) {
        refusal = "rank " + std::to_string(hello.rank) + " registered twice (" + addresses_[hello.rank] + ", then " +
                  peer + "): two processes were given the same FLOTILLA_RANK";
      } else if (hello.job_id != 0) {
        refusal = peer + " (rank " + std::to_string(hello.rank) + ") registered with a job id from another job";
      }
      if (!refusal.empty()) refuse(c, refusal);
      const std::size_t k = hello.rank;
      std::string host = hello.listen_host;
      if (host.empty() || is_wildcard_host(host)) host = remote_host_port(c.socket).host;
      table.entries[k] = {host, hello.listen_port};
      addresses_[k] = format_host_port(host, hello.listen_port);
      c.peer = k;
      c.address = addresses_[k];
      links_[k] = std::move(c);
      ++registered;
    }
    const auto payload = wire::encode_table(table);
    for (std::size_t k = 1; k < n_; ++k)
      send_frame(links_[k], wire::FrameType::table, payload, "rank " + std::to_string(k) + " at " + addresses_[k]);
  }

  // Ranks 1 to n-1: register with the coordinator, get the table, connect to the higher ranks and
  // accept the lower ones.
  void join() {
    listener_.emplace(listen_on(reactor_->io, o_.bind, 0, o_.socket_buffer_bytes, who() + ": cannot listen (FLOTILLA_BIND)"));
    Listener& listener = *listener_;
    const std::string coord = "rank 0 (the coordinator) at " + addresses_[0];
    TcpLink& c0 = links_[0];
    c0.socket = connect_to(reactor_->io, coordinator_, until_, o_.socket_buffer_bytes,
                       who() + ": rendezvous: cannot reach the coordinator within " + connect_text() +
                           " (FLOTILLA_COORDINATOR)");
    std::string host = o_.bind;
    if (is_wildcard_host(host)) host = local_host_port(c0.socket).host;
    const auto registration = hello_payload(listener.port, host);
    send_frame(c0, wire::FrameType::hello, registration, coord);
    const auto hello = client_handshake(c0, registration, coord, "registering with " + coord);
    if (hello.rank != 0) refuse(c0, coord + " answered as rank " + std::to_string(hello.rank));
    const auto tf = read_frame(c0, coord, "waiting for the table of ranks from " + coord);
    if (tf.header().type == wire::FrameType::abort)
      fail("waiting for the table of ranks: " + coord + " gave up: " + text_of(tf.payload));
    if (tf.header().type == wire::FrameType::refuse)
      fail("waiting for the table of ranks: " + coord + " refused this rank: " + text_of(tf.payload));
    auto table = tf.header().type == wire::FrameType::table ? wire::decode_table(tf.payload) : std::nullopt;
    if (!table || table->entries.size() != n_ || table->job_id == 0)
      fail(coord + " sent a malformed table of ranks");
    job_id_ = table->job_id;
    for (std::size_t p = 1; p < n_; ++p) addresses_[p] = format_host_port(table->entries[p].host, table->entries[p].port);
    c0.address = addresses_[0];

    // 1. Connect to every higher rank and say hello. Each listens already (it registered after
    //    listening), and the kernel completes the connection before the peer accepts it, so this
    //    waits for no peer.
    std::vector<std::vector<std::byte>> sent(n_);
    for (std::size_t p = r_ + 1; p < n_; ++p) {
      const std::string peer = "rank " + std::to_string(p) + " at " + addresses_[p];
      links_[p].socket = connect_to(reactor_->io, {table->entries[p].host, table->entries[p].port}, until_, o_.socket_buffer_bytes,
                                who() + ": rendezvous: cannot connect to " + peer + " within " + connect_text());
      links_[p].address = addresses_[p];
      sent[p] = hello_payload(0, {});
      send_frame(links_[p], wire::FrameType::hello, sent[p], peer);
    }
    // 2. Accept every lower rank but 0 (whose link is the registration): answer its hello, and
    //    authenticate it. A lower rank proves its secret (step 3) once the ranks below it have
    //    been answered, so every wait here ends.
    for (std::size_t accepted = 0; accepted + 1 < r_;) {
      auto arrival = accept_hello(
          listener, "accepting", r_, [&] { return hello_payload(0, {}); },
          [&](const std::string& missing) {
            return "timed out after " + connect_text() + " waiting for rank(s) " + missing + " to connect to " +
                   addresses_[r_];
          });
      if (!arrival) continue;
      TcpLink& c = arrival->link;
      const std::string& peer = arrival->peer;
      const auto& h = arrival->hello;
      std::string refusal = check_world_size(h, peer);
      if (!refusal.empty()) {
      } else if (h.job_id != job_id_) {
        refusal = peer + " belongs to another job (its job id differs from the coordinator's)";
      } else if (h.rank == 0 || h.rank >= r_) {
        refusal = peer + " claims rank " + std::to_string(h.rank) + ", but only ranks 1 to " + std::to_string(r_ - 1) +
                  " connect to rank " + std::to_string(r_);
      } else if (links_[h.rank].open()) {
        refusal = "rank " + std::to_string(h.rank) + " connected twice";
      }
      if (!refusal.empty()) refuse(c, refusal);
      c.peer = h.rank;
      c.address = addresses_[h.rank];
      links_[h.rank] = std::move(c);
      ++accepted;
    }
    // 3. The higher ranks' answers, and this rank's proofs.
    for (std::size_t p = r_ + 1; p < n_; ++p) {
      const std::string peer = "rank " + std::to_string(p) + " at " + addresses_[p];
      const auto h = client_handshake(links_[p], sent[p], peer, "connecting to " + peer);
      if (h.rank != p || h.job_id != job_id_) refuse(links_[p], peer + " answered as another rank or job");
    }
  }

  // A rank that died and was started again: reconnects to the ranks FLOTILLA_REJOIN names (each
  // answers with its rank and the job's id), and to no other.
  void rejoin_running_job() {
    for (const auto& text : o_.rejoin) {
      const auto hp = *parse_host_port(text);
      const std::string peer = "the rank at " + text;
      TcpLink l(reactor_);
      l.socket = connect_to(reactor_->io, hp, until_, o_.socket_buffer_bytes,
                            who() + ": rejoining: cannot reach " + peer + " within " + connect_text() + " (FLOTILLA_REJOIN)");
      const auto sent = hello_payload(0, {});
      send_frame(l, wire::FrameType::hello, sent, peer);
      const auto h = client_handshake(l, sent, peer, "rejoining through " + peer);
      if (h.rank >= n_ || h.rank == r_)
        refuse(l, peer + " answered as rank " + std::to_string(h.rank) + ", which this rank cannot rejoin");
      if (links_[h.rank].open()) refuse(l, peer + " is rank " + std::to_string(h.rank) + ", which FLOTILLA_REJOIN names twice");
      if (job_id_ != 0 && h.job_id != job_id_) refuse(l, peer + " belongs to another job than the ranks before it in FLOTILLA_REJOIN");
      // The peer's word on the rank (it refuses one that is still alive): a table frame, empty.
      const std::string waiting = "waiting for " + peer + " to take this rank back";
      const auto answer = read_frame(l, peer, waiting);
      if (answer.header().type == wire::FrameType::refuse)
        fail(waiting + ": " + peer + " refused this rank: " + text_of(answer.payload));
      if (answer.header().type == wire::FrameType::abort) fail(waiting + ": " + peer + " gave up: " + text_of(answer.payload));
      const auto welcome = answer.header().type == wire::FrameType::table ? wire::decode_table(answer.payload) : std::nullopt;
      if (!welcome || welcome->job_id != h.job_id) fail(waiting + ": " + peer + " answered with a malformed frame");
      job_id_ = h.job_id;
      l.peer = h.rank;
      l.address = text;
      addresses_[h.rank] = text;
      links_[h.rank] = std::move(l);
    }
    for (auto& a : addresses_)
      if (a.empty()) a = "(not reconnected after the rejoin)";
  }

  Clock::time_point io_until() const { return std::min(until_, conn_until_); }
  std::string timed_out_text() const {
    return conn_until_ < until_ ? " (a connection's handshake may take " + std::to_string(handshake_limit.count()) + " ms)"
                                : " after " + connect_text();
  }

  const TcpOptions& o_;
  std::size_t n_, r_;
  Clock::time_point until_;
  Clock::time_point conn_until_ = Clock::time_point::max();  // the accepted connection's handshake deadline
  std::shared_ptr<TcpReactor> reactor_;  // the endpoint's, once the rendezvous is done
  HostPort coordinator_;
  std::uint64_t job_id_ = 0;
  std::vector<TcpLink> links_;
  std::vector<std::string> addresses_;
  TrafficCounters counters_{};
  std::optional<Listener> listener_;
  // For messages: what this handshake is part of, and what the rank does after dropping a peer.
  std::string phase_ = o_.rejoin.empty() ? "rendezvous" : "rejoining a running job";
  std::string going_on_ = "still waiting for the ranks";
};

/// Under flotilla-launch (FLOTILLA_LAUNCH_REPORTS names a directory of the launcher's): records
/// which rank's failure ended this one, its own or a peer's. The ranks that fail because another
/// did often exit before it; this is how the launcher still names the rank that failed first.
inline void tcp_report_failure(std::size_t rank, std::size_t culprit) noexcept {
  try {
    const char* dir = std::getenv("FLOTILLA_LAUNCH_REPORTS");
    if (dir == nullptr || *dir == '\0') return;
    const std::string path = std::string(dir) + "/rank-" + std::to_string(rank);
    const Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!fd) return;
    const std::string text = std::to_string(culprit) + "\n";
    if (::write(fd.get(), text.data(), text.size()) < 0) return;
  } catch (...) {
  }
}

}  // namespace detail

inline TcpEndpoint TcpEndpoint::connect(const TcpOptions& options) {
  detail::tcp_validate(options);
  detail::TcpRendezvous rv(options);
  rv.run();
  TcpEndpoint e(options, rv.reactor(), rv.links(), rv.addresses(), rv.counters(), rv.listener(), rv.job_id());
  e.ranks_on_host_ = 1 + static_cast<std::size_t>(std::count_if(e.links_.begin(), e.links_.end(), [&e](const auto& l) {
                       return e.open_peer_link(l) && e.link_on_this_host(l);
                     }));
  if (options.world_size > 1 && options.rejoin.empty()) {
    // The setup's messages are part of the rendezvous: counted as framing, like the handshake.
    const TrafficCounters before = e.counters_;
    e.negotiate_shared_memory();
    const TrafficCounters setup = e.counters_ - before;
    e.counters_ = before;
    e.counters_.header_bytes_sent += setup.payload_bytes_sent + setup.header_bytes_sent;
    e.counters_.header_bytes_received += setup.payload_bytes_received + setup.header_bytes_received;
  }
  return e;
}

inline bool TcpEndpoint::link_on_this_host(const detail::TcpLink& l) const {
  detail::ErrorCode e1, e2;
  const auto remote = l.socket.remote_endpoint(e1).address();
  const auto local = l.socket.local_endpoint(e2).address();
  return !e1 && !e2 && (remote.is_loopback() || remote == local);
}

inline bool TcpEndpoint::peers_on_this_host() const {
  for (const auto& l : links_)
    if (open_peer_link(l) && !link_on_this_host(l)) return false;
  return true;
}

// The job's agreement on the shared-memory path, over the authenticated connections with rank 0
// (tag shared_memory_setup_tag), in every job of more than one rank, so that ranks that were given
// different settings find out here rather than hang in their first sum:
//   1. each rank tells rank 0 its setting: "off|auto|on <bytes>";
//   2. rank 0 answers each with the plan: "skip", "fail <why>", or "try <bytes> <required> <name>"
//      after it made the segment under that name;
//   3. each rank maps the segment and answers "" or why not;
//   4. rank 0 removes the name (the segment lives on in the mappings only, so nothing is left
//      behind however the job ends) and sends the verdict: "" or the first rank's reason.
// A failed verdict ends the rendezvous when the path was required (TcpSharedMemory::on) and
// leaves the job on its sockets otherwise.
inline void TcpEndpoint::negotiate_shared_memory() {
  using detail::SharedMemoryAllreduce;
  const Tag tag = detail::shared_memory_setup_tag;
  const std::string context = who() + ": cannot set up the shared-memory allreduce (TcpOptions::shared_memory, FLOTILLA_SHARED_MEMORY): ";
  auto receive_text = [&](std::size_t from) {
    std::array<char, 512> buffer{};
    std::size_t length = 0;
    recv(from, tag, std::as_writable_bytes(std::span<std::size_t>(&length, 1)));
    if (length > buffer.size())
      throw TransportError(who() + ": shared-memory setup: rank " + std::to_string(from) + " sent " +
                           std::to_string(length) + " bytes of text, more than " + std::to_string(buffer.size()));
    recv(from, tag, std::as_writable_bytes(std::span<char>(buffer.data(), length)));
    return std::string(buffer.data(), length);
  };
  auto send_text = [&](std::size_t to, const std::string& t) {
    const std::size_t length = t.size();
    send(to, tag, std::as_bytes(std::span<const std::size_t>(&length, 1)));
    send(to, tag, std::as_bytes(std::span<const char>(t.data(), t.size())));
  };
  static constexpr const char* mode_names[] = {"off", "auto", "on"};
  const auto own_mode = static_cast<std::size_t>(options_.shared_memory);

  if (rank_ != 0) {
    send_text(0, std::string(mode_names[own_mode]) + " " + std::to_string(options_.shared_memory_bytes));
    const std::string plan = receive_text(0);
    if (plan == "skip") return;
    if (plan.starts_with("fail ")) throw TransportError(context + plan.substr(5));
    std::size_t capacity = 0;
    int required = 0, used = 0;
    char name[256] = {};
    if (std::sscanf(plan.c_str(), "try %zu %d %255s%n", &capacity, &required, name, &used) != 3 ||
        static_cast<std::size_t>(used) != plan.size() || !detail::shared_memory_piece_bytes_valid(capacity))
      throw TransportError(who() + ": shared-memory setup: rank 0 sent a malformed plan '" + plan + "'");
    std::string answer;
    try {
      shared_memory_ = std::make_unique<SharedMemoryAllreduce>(SharedMemoryAllreduce::open(name, rank_, size_, capacity));
    } catch (const TransportError& x) {
      answer = x.what();
    }
    send_text(0, answer);
    const std::string verdict = receive_text(0);
    if (verdict.empty()) {
      options_.shared_memory_bytes = capacity;
      return;
    }
    shared_memory_.reset();
    if (required != 0) throw TransportError(context + verdict);
    return;
  }

  // Rank 0: gather the settings, decide, make the segment.
  std::vector<std::size_t> modes(size_, own_mode), capacities(size_, options_.shared_memory_bytes);
  std::string problem;
  for (std::size_t p = 1; p < size_; ++p) {
    const std::string offer = receive_text(p);
    char mode[8] = {};
    int used = 0;
    std::size_t k = 3;  // no mode until one is recognised
    if (std::sscanf(offer.c_str(), "%7s %zu%n", mode, &capacities[p], &used) == 2 &&
        static_cast<std::size_t>(used) == offer.size() && detail::shared_memory_piece_bytes_valid(capacities[p]))
      for (k = 0; k < 3 && std::strcmp(mode, mode_names[k]) != 0;) ++k;
    if (k < 3) modes[p] = k;
    else if (problem.empty()) problem = "rank " + std::to_string(p) + " sent a malformed setting '" + offer + "'";
  }
  const auto on = static_cast<std::size_t>(TcpSharedMemory::on), off = static_cast<std::size_t>(TcpSharedMemory::off);
  const auto first = [&](std::size_t mode) { return std::size_t(std::find(modes.begin(), modes.end(), mode) - modes.begin()); };
  const bool required = first(on) < size_, some_off = first(off) < size_;
  const std::size_t capacity = required ? capacities[first(on)] : capacities[0];
  if (problem.empty() && required && some_off)
    problem = "rank " + std::to_string(first(on)) + " requires it (on) and rank " + std::to_string(first(off)) +
              " has it off: give every rank the same FLOTILLA_SHARED_MEMORY";
  for (std::size_t r = 0; r < size_ && problem.empty() && required; ++r)
    if (modes[r] == on && capacities[r] != capacity)
      problem = "rank " + std::to_string(first(on)) + " sums pieces of " + std::to_string(capacity) + " bytes and rank " +
                std::to_string(r) + " of " + std::to_string(capacities[r]) + ": give every rank the same shared_memory_bytes";
  if (problem.empty() && required && !detail::shared_memory_allreduce_available) problem = "it needs Linux";
  const bool conflict = !problem.empty();  // the settings disagree: every rank fails, whatever the modes
  const bool attempt = !conflict && !some_off && detail::shared_memory_allreduce_available && (required || peers_on_this_host());
  std::string name;
  if (attempt) {
    name = SharedMemoryAllreduce::random_name();
    try {
      shared_memory_ = std::make_unique<SharedMemoryAllreduce>(SharedMemoryAllreduce::create(name, size_, capacity));
    } catch (const TransportError& x) {
      problem = std::string("rank 0: ") + x.what();
    }
  }
  if (!shared_memory_) {
    const bool fatal = conflict || (required && !problem.empty());
    for (std::size_t p = 1; p < size_; ++p) send_text(p, fatal ? "fail " + problem : std::string("skip"));
    if (fatal) throw TransportError(context + problem);
    if (!problem.empty()) detail::tcp_log(options_, who() + ": summing over the sockets: " + problem);
    return;
  }
  for (std::size_t p = 1; p < size_; ++p)
    send_text(p, "try " + std::to_string(capacity) + " " + (required ? "1 " : "0 ") + name);
  for (std::size_t p = 1; p < size_; ++p) {
    const std::string answer = receive_text(p);
    if (problem.empty() && !answer.empty()) problem = "rank " + std::to_string(p) + ": " + answer;
  }
  ::shm_unlink(name.c_str());  // mapped by every rank that could: the name must not outlive the job
  for (std::size_t p = 1; p < size_; ++p) send_text(p, problem);
  if (problem.empty()) {
    options_.shared_memory_bytes = capacity;
    return;
  }
  shared_memory_.reset();
  if (required) throw TransportError(context + problem);
  detail::tcp_log(options_, who() + ": summing over the sockets: " + problem);
}

inline std::optional<std::size_t> TcpEndpoint::hung_up_peer() noexcept {
  for (auto& l : links_) {
    if (l.peer == rank_ || l.peer == detail::tcp_nobody) continue;
    if (l.lost || !l.open()) return l.peer;
    pollfd f{l.socket.native_handle(), POLLRDHUP, 0};
    if (::poll(&f, 1, 0) > 0 && (f.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) return l.peer;
  }
  return std::nullopt;
}

inline void TcpEndpoint::allreduce_sum(std::span<float> values) {
  if (!shared_memory_)
    throw ConfigError(who() + ": allreduce_sum needs the shared-memory allreduce, which is off (TcpOptions::shared_memory, "
                      "FLOTILLA_SHARED_MEMORY; the ranks must be on one host) or was switched off by a lost peer");
  begin(detail::TcpOp{"allreduce_sum"});
  detail::SharedMemoryAllreduce::Watch w{options_.timeout, [this] { return hung_up_peer(); }, [this] { return who(); },
                                          [this](std::size_t p) { return peer_name(p); }};
  try {
    shared_memory_->allreduce_sum(values, w, counters_);
  } catch (const TransportError& x) {
    // The ranks' calls are out of step now: later sums go through the sockets (the ring).
    shared_memory_.reset();
    const auto* lost = dynamic_cast<const PeerLostError*>(&x);
    if (lost && lost->peer() < links_.size()) {
      Link& l = links_[lost->peer()];
      // A peer that failed because another did sent the first failure's reason (an abort frame)
      // before it closed: read it, and fail with it, as a socket operation would have.
      if (!survive_lost_peers_ && l.open()) {
        try {
          pump(l, false);
        } catch (const PeerLostError&) {  // it closed without one: the report below stands
        }
      }
      // Lost as if a socket operation had found it, so that this loss is reported once, here,
      // and not again when the reactor reads the closed connection during a later operation.
      mark_lost(l);
    }
    if (lost && survive_lost_peers_) throw;
    broken_ = x.what();
    culprit_ = lost ? lost->peer() : rank_;
    throw;
  }
}

inline void TcpEndpoint::accept_rejoin() {
  detail::TcpRendezvous rv(options_, reactor_, job_id_);
  std::optional<detail::TcpRendezvous::Arrival> a;
  try {
    a = rv.accept_hello(
        rejoin_listener_->listener, "accepting", 0, [&] { return rv.hello_payload(0, {}); },
        [](const std::string&) { return std::string("no connection was waiting after all"); });
  } catch (const TransportError& e) {
    rv.log(std::string(e.what()) + "; going on");
    return;
  }
  if (!a) return;
  const std::size_t p = a->hello.rank;
  std::string refusal = rv.check_world_size(a->hello, a->peer);
  if (!refusal.empty()) {
  } else if (p >= size_ || p == rank_) {
    refusal = a->peer + " claims rank " + std::to_string(p) + ", which cannot rejoin " + who();
  } else if (links_[p].goodbye && !links_[p].lost) {
    refusal = "rank " + std::to_string(p) + " has finished (it said goodbye to " + who() + "): " + a->peer +
              " cannot rejoin as rank " + std::to_string(p);
  } else if (!links_[p].lost) {
    refusal = "rank " + std::to_string(p) + " is still alive (its connection to " + who() + " is open): " + a->peer +
              " cannot rejoin as rank " + std::to_string(p) + " (two processes given the same FLOTILLA_RANK?)";
  }
  if (!refusal.empty()) {
    rv.tell_refused(a->link, refusal);
    rv.log(who() + ": refused " + a->peer + ": " + refusal);
    return;
  }
  try {
    wire::Table welcome;
    welcome.job_id = job_id_;
    rv.send_frame(a->link, wire::FrameType::table, wire::encode_table(welcome), a->peer);
  } catch (const TransportError& e) {
    rv.log(std::string(e.what()) + "; going on without rank " + std::to_string(p));
    return;
  }
  // The lost link's waits ended when it was closed; its guard is the heartbeat thread's.
  Link& l = links_[p];
  l.socket = std::move(a->link.socket);
  l.send_sequence = a->link.send_sequence;
  l.recv_sequence = a->link.recv_sequence;
  l.read_armed = l.write_armed = l.read_fired = false;
  l.wait_error = {};
  l.parked = l.send_broken = l.lost = l.in_frame = l.large = l.goodbye = l.eof = false;
  l.begin = l.end = 0;
  l.frame = {};
  l.frame_done = 0;
  l.sink = Link::Sink::staging;
  l.user = nullptr;
  l.staging.reset();
  l.queue.clear();
  l.tokens.clear();
  l.heard = Clock::now();
  shared_memory_.reset();  // the rejoined rank has no segment: from here on the job sums over the sockets
  addresses_[p] = detail::format_host_port(detail::remote_host_port(l.socket));
  l.address = addresses_[p];
  {
    std::lock_guard lock(l.guard->m);
    l.guard->fd = l.socket.native_handle();
    l.guard->beating = true;
    l.guard->mid_frame = false;
    l.guard->beat_done = wire::header_size;
  }
  rv.log(who() + ": rank " + std::to_string(p) + " rejoined from " + addresses_[p]);
}

/// The TCP backend: run() connects this process's rank to the others, runs the body, and shuts
/// down in order (or, when the body throws, tells the peers and rethrows).
struct Tcp {
  static constexpr std::string_view name = "tcp";
  static constexpr bool in_process = false;
  using options = TcpOptions;
  using endpoint = TcpEndpoint;

  static void run(const options& o, std::size_t ranks, const std::function<void(endpoint&)>& body) {
    detail::tcp_validate(o);
    // ranks == 0: the job is as the launcher started it.
    if (ranks != 0 && o.world_size != ranks)
      throw ConfigError("Tcp::run: the job needs " + std::to_string(ranks) + " ranks, but this process was started as rank " +
                        std::to_string(o.rank) + " of " + std::to_string(o.world_size) +
                        " (FLOTILLA_WORLD_SIZE=" + std::to_string(o.world_size) + "); start it with flotilla-launch -n " +
                        std::to_string(ranks) + " -- <program>, or set FLOTILLA_WORLD_SIZE=" + std::to_string(ranks) +
                        " on every rank");
    endpoint e = endpoint::connect(o);
    try {
      body(e);
    } catch (const std::exception& ex) {
      detail::tcp_report_failure(o.rank, e.failed_peer().value_or(o.rank));
      e.abort("rank " + std::to_string(o.rank) + " failed: " + ex.what());
      throw;
    } catch (...) {
      detail::tcp_report_failure(o.rank, e.failed_peer().value_or(o.rank));
      e.abort("rank " + std::to_string(o.rank) + " failed");
      throw;
    }
    try {
      e.close();
    } catch (...) {
      detail::tcp_report_failure(o.rank, e.failed_peer().value_or(o.rank));
      throw;
    }
  }
};

}  // namespace flotilla::transport
