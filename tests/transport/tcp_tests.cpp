// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The TCP transport and its launcher: options, wire format, handshake refusals, corrupt and hostile
// input, failures and timeouts, and the launcher's handling of failing ranks. (The conformance suite
// runs over 1 to 4 processes as tests of their own; see CMakeLists.txt.)
//
// Test cases are named "<group>: ...", and CTest runs each group as a test: tcp.options, tcp.wire,
// tcp.handshake, tcp.hostile, tcp.failure, tcp.stress, tcp.launcher.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <netinet/in.h>
#include <poll.h>
#include <openssl/evp.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "flotilla/cli/flags.hpp"
#include "flotilla/collective/broadcast.hpp"
#include "flotilla/collective/ring_allreduce.hpp"
#include "flotilla/transport/tcp.hpp"
#include "../../tools/launch_command_line.hpp"

using namespace flotilla;
using transport::Tcp;
using transport::TcpEndpoint;
using transport::TcpOptions;
namespace wire = transport::wire;
using Clock = std::chrono::steady_clock;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

long long ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

/// Sets environment variables for the scope of a test, and restores them after.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const char* name : names) {
      if (const char* v = std::getenv(name)) saved_[name] = v;
      ::unsetenv(name);
    }
    for (const auto& [k, v] : vars) ::setenv(k, v, 1);
  }
  ~ScopedEnv() {
    for (const char* name : names) ::unsetenv(name);
    for (const auto& [k, v] : saved_) ::setenv(k.c_str(), v.c_str(), 1);
  }

 private:
  static constexpr const char* names[] = {"FLOTILLA_RANK",         "FLOTILLA_WORLD_SIZE",   "FLOTILLA_COORDINATOR",
                                          "FLOTILLA_BIND",         "FLOTILLA_TIMEOUT_MS",   "FLOTILLA_CONNECT_TIMEOUT_MS",
                                          "FLOTILLA_SOCKET_BUFFER", "FLOTILLA_SECRET",      "FLOTILLA_SECRET_FILE",
                                          "FLOTILLA_UNSENT_LIMIT", "FLOTILLA_READ_WHILE_SENDING",
                                          "FLOTILLA_HEARTBEAT_MS", "FLOTILLA_CHECKSUM_DATA", "FLOTILLA_FRAME_MAC", "FLOTILLA_SHARED_MEMORY",
                                          "FLOTILLA_SPIN_US",      "FLOTILLA_REJOIN",       "FLOTILLA_LOCAL_RANK",
                                          // other launchers' (transport/launcher.hpp)
                                          "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                                          "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                                          "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_STEP_ID", "SLURM_STEPID"};
  std::map<std::string, std::string> saved_;
};

/// What a rank's transport logged (TcpOptions::log): a count, and the first lines.
class Log {
 public:
  std::function<void(const std::string&)> sink() {
    return [state = state_](const std::string& line) {
      const std::lock_guard lock(state->m);
      ++state->count;
      if (state->lines.size() < 50) state->lines.push_back(line);
    };
  }
  std::size_t count() const {
    const std::lock_guard lock(state_->m);
    return state_->count;
  }
  bool has(const std::string& part) const {
    const std::lock_guard lock(state_->m);
    for (const auto& l : state_->lines)
      if (l.find(part) != std::string::npos) return true;
    return false;
  }
  std::string text() const {
    const std::lock_guard lock(state_->m);
    std::string s;
    for (const auto& l : state_->lines) s += l + "\n";
    return s;
  }

 private:
  struct State {
    mutable std::mutex m;
    std::size_t count = 0;
    std::vector<std::string> lines;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

std::string config_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

TcpOptions job(std::size_t rank, std::size_t world, std::uint16_t port) {
  TcpOptions o;
  o.rank = rank;
  o.world_size = world;
  o.coordinator = "127.0.0.1:" + std::to_string(port);
  o.timeout = std::chrono::seconds(5);
  o.connect_timeout = std::chrono::seconds(5);
  return o;
}

/// Runs one rank of a job on a thread of this process; error() is what it threw ("" if nothing).
class RankThread {
 public:
  RankThread(TcpOptions o, std::function<void(TcpEndpoint&)> body)
      : thread_([this, o, body = std::move(body)] {
          try {
            Tcp::run(o, o.world_size, body);
          } catch (const std::exception& e) {
            error_ = e.what();
            failed_ = true;
          }
        }) {}
  ~RankThread() {
    if (thread_.joinable()) thread_.join();
  }
  /// Joins, and returns the error ("" when the rank succeeded).
  std::string error() {
    if (thread_.joinable()) thread_.join();
    return failed_ ? error_ : std::string();
  }

 private:
  std::string error_;
  bool failed_ = false;
  std::thread thread_;
};

/// A peer that speaks the wire format by hand, to send what a real rank never would: a socket of
/// its own io_context, through the transport's socket helpers.
class FakePeer {
 public:
  using Socket = transport::tcp::detail::TcpSocket;
  explicit FakePeer(std::uint16_t port)
      : io_(std::make_shared<boost::asio::io_context>()),
        socket_(transport::tcp::detail::connect_to(*io_, {"127.0.0.1", port}, Clock::now() + std::chrono::seconds(5), 0,
                                              "fake peer")) {}
  /// An accepted connection, of `io`.
  FakePeer(std::shared_ptr<boost::asio::io_context> io, Socket socket) : io_(std::move(io)), socket_(std::move(socket)) {}

  void write(std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
      boost::system::error_code ec;
      const std::size_t n = socket_.write_some(boost::asio::buffer(bytes.data(), bytes.size()), ec);
      if (!ec && n > 0) {
        bytes = bytes.subspan(n);
      } else if (transport::tcp::detail::would_block(ec)) {
        transport::tcp::detail::wait_ready(*io_, socket_, Socket::wait_write, Clock::now() + std::chrono::seconds(5));
      } else {
        return;  // the other side may have closed: what the test is about
      }
    }
  }
  void frame(wire::Header h, std::span<const std::byte> payload, bool break_crc = false) {
    h.payload_length = payload.size();
    auto bytes = wire::encode(h);
    if (break_crc) bytes[44] ^= std::byte{0xFF};
    write(bytes);
    write(payload);
  }
  void hello(std::uint32_t world, std::uint32_t rank, std::uint16_t version = wire::protocol_version) {
    wire::Header h;
    h.version = version;
    h.type = wire::FrameType::hello;
    h.sequence = 0;
    wire::Hello m;
    m.world_size = world;
    m.rank = rank;
    m.listen_port = 1;
    m.listen_host = "127.0.0.1";
    frame(h, wire::encode_hello(m));
  }
  /// Reads one frame; empty when the connection closed (or nothing came within 5 s).
  std::optional<std::pair<wire::Header, std::string>> read() {
    wire::HeaderBytes hb;
    if (!read_exact(hb.data(), hb.size())) return std::nullopt;
    const auto d = wire::decode(hb);
    if (!d.problem().empty() || d.header.payload_length > wire::max_control_payload) return std::nullopt;
    std::string payload(static_cast<std::size_t>(d.header.payload_length), '\0');
    if (!read_exact(reinterpret_cast<std::byte*>(payload.data()), payload.size())) return std::nullopt;
    return std::pair{d.header, payload};
  }
  /// Ends this side's sending, as a process that exits does (a FIN after what was written).
  void hang_up() {
    boost::system::error_code ec;
    socket_.shutdown(Socket::shutdown_send, ec);
  }
  /// Whether the other side has closed the connection (reads and drops what is pending).
  bool closed() {
    std::byte b[256];
    const auto until = Clock::now() + std::chrono::seconds(5);
    while (transport::tcp::detail::wait_ready(*io_, socket_, Socket::wait_read, until)) {
      boost::system::error_code ec;
      socket_.read_some(boost::asio::buffer(b), ec);
      if (ec && !transport::tcp::detail::would_block(ec) && ec != boost::asio::error::interrupted) return true;
    }
    return false;
  }

 private:
  bool read_exact(std::byte* p, std::size_t n) {
    const auto until = Clock::now() + std::chrono::seconds(5);
    while (n > 0) {
      boost::system::error_code ec;
      const std::size_t r = socket_.read_some(boost::asio::buffer(p, n), ec);
      if (!ec && r > 0) {
        p += r;
        n -= r;
      } else if (transport::tcp::detail::would_block(ec) || ec == boost::asio::error::interrupted) {
        if (!transport::tcp::detail::wait_ready(*io_, socket_, Socket::wait_read, until)) return false;
      } else {
        return false;
      }
    }
    return true;
  }
  std::shared_ptr<boost::asio::io_context> io_;  // first: it outlives the socket
  Socket socket_;
};

std::span<const std::byte> bytes_of(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace

// ---- options -----------------------------------------------------------------------------------

TEST_CASE("options: from the environment") {
  static_assert(Transport<TcpEndpoint>);
  static_assert(KnowsRanksOnHost<TcpEndpoint>);
  static_assert(TransportBackend<Tcp>);
  static_assert(Tcp::name == "tcp" && !Tcp::in_process);
  {
    ScopedEnv env({});
    const auto o = TcpOptions::from_environment();
    CHECK(o.rank == 0);
    CHECK(o.world_size == 1);
    CHECK(o.bind == "127.0.0.1");  // loopback unless asked
    CHECK(o.timeout == std::chrono::milliseconds(30000));
    CHECK(o.shared_memory == transport::TcpSharedMemory::automatic);
    CHECK(o.shared_memory_bytes == std::size_t{1} << 20);
    CHECK(o.spin == std::chrono::microseconds(50));
  }
  for (const auto& [text, us] : {std::pair{"0", 0}, std::pair{"200", 200}, std::pair{"1000000", 1'000'000}}) {
    ScopedEnv env({{"FLOTILLA_SPIN_US", text}});
    CAPTURE(text);
    CHECK(TcpOptions::from_environment().spin == std::chrono::microseconds(us));
  }
  {
    using transport::TcpSharedMemory;
    const std::vector<std::tuple<const char*, TcpSharedMemory, std::size_t>> settings = {
        {"auto", TcpSharedMemory::automatic, 1u << 20}, {"on", TcpSharedMemory::on, 1u << 20},
        {"off", TcpSharedMemory::off, 1u << 20},        {"0", TcpSharedMemory::off, 1u << 20},
        {"65536", TcpSharedMemory::on, 65536}};
    for (const auto& [text, mode, bytes] : settings) {
      ScopedEnv env({{"FLOTILLA_SHARED_MEMORY", text}});
      const auto o = TcpOptions::from_environment();
      CAPTURE(text);
      CHECK(o.shared_memory == mode);
      CHECK(o.shared_memory_bytes == bytes);
    }
  }
  {
    ScopedEnv env({{"FLOTILLA_RANK", "2"}, {"FLOTILLA_WORLD_SIZE", "4"}, {"FLOTILLA_COORDINATOR", "10.0.0.1:29500"},
                   {"FLOTILLA_BIND", "0.0.0.0"}, {"FLOTILLA_TIMEOUT_MS", "1500"}, {"FLOTILLA_CONNECT_TIMEOUT_MS", "900"},
                   {"FLOTILLA_SOCKET_BUFFER", "1048576"}, {"FLOTILLA_UNSENT_LIMIT", "0"},
                   {"FLOTILLA_READ_WHILE_SENDING", "0"}});
    const auto o = TcpOptions::from_environment();
    CHECK(o.rank == 2);
    CHECK(o.world_size == 4);
    CHECK(o.coordinator == "10.0.0.1:29500");
    CHECK(o.bind == "0.0.0.0");
    CHECK(o.timeout == std::chrono::milliseconds(1500));
    CHECK(o.connect_timeout == std::chrono::milliseconds(900));
    CHECK(o.socket_buffer_bytes == 1048576);
    CHECK(o.unsent_limit_bytes == 0);
    CHECK(!o.read_while_sending);
  }
  {
    ScopedEnv env({{"FLOTILLA_RANK", "0"}, {"FLOTILLA_WORLD_SIZE", "2"}, {"FLOTILLA_COORDINATOR", "[::1]:7000"}});
    CHECK(TcpOptions::from_environment().coordinator == "[::1]:7000");
  }
}

TEST_CASE("options: every bad value names the variable and the text") {
  struct Case {
    std::vector<std::pair<const char*, const char*>> env;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {{{"FLOTILLA_RANK", "two"}, {"FLOTILLA_WORLD_SIZE", "4"}, {"FLOTILLA_COORDINATOR", "h:1"}},
       {"FLOTILLA_RANK", "'two'"}},
      {{{"FLOTILLA_RANK", "-1"}, {"FLOTILLA_WORLD_SIZE", "4"}, {"FLOTILLA_COORDINATOR", "h:1"}}, {"FLOTILLA_RANK", "'-1'"}},
      {{{"FLOTILLA_RANK", "4"}, {"FLOTILLA_WORLD_SIZE", "4"}, {"FLOTILLA_COORDINATOR", "h:1"}},
       {"FLOTILLA_RANK is 4", "FLOTILLA_WORLD_SIZE is 4", "0 to 3"}},
      {{{"FLOTILLA_WORLD_SIZE", "0"}}, {"FLOTILLA_WORLD_SIZE", "'0'"}},
      {{{"FLOTILLA_WORLD_SIZE", "4x"}}, {"FLOTILLA_WORLD_SIZE", "'4x'"}},
      {{{"FLOTILLA_WORLD_SIZE", "4"}, {"FLOTILLA_COORDINATOR", "h:1"}}, {"FLOTILLA_RANK is not set", "FLOTILLA_WORLD_SIZE is 4"}},
      {{{"FLOTILLA_RANK", "1"}}, {"FLOTILLA_WORLD_SIZE is not set", "FLOTILLA_RANK is 1"}},
      {{{"FLOTILLA_RANK", "1"}, {"FLOTILLA_WORLD_SIZE", "2"}}, {"FLOTILLA_COORDINATOR is not set"}},
      {{{"FLOTILLA_RANK", "1"}, {"FLOTILLA_WORLD_SIZE", "2"}, {"FLOTILLA_COORDINATOR", "localhost"}},
       {"FLOTILLA_COORDINATOR", "'localhost'", "host:port"}},
      {{{"FLOTILLA_RANK", "1"}, {"FLOTILLA_WORLD_SIZE", "2"}, {"FLOTILLA_COORDINATOR", "h:70000"}},
       {"FLOTILLA_COORDINATOR", "'h:70000'"}},
      {{{"FLOTILLA_RANK", "1"}, {"FLOTILLA_WORLD_SIZE", "2"}, {"FLOTILLA_COORDINATOR", "h:0"}}, {"FLOTILLA_COORDINATOR", "'h:0'"}},
      {{{"FLOTILLA_TIMEOUT_MS", "soon"}}, {"FLOTILLA_TIMEOUT_MS", "'soon'"}},
      {{{"FLOTILLA_TIMEOUT_MS", "0"}}, {"FLOTILLA_TIMEOUT_MS", "'0'", "positive"}},
      {{{"FLOTILLA_CONNECT_TIMEOUT_MS", "1e3"}}, {"FLOTILLA_CONNECT_TIMEOUT_MS", "'1e3'"}},
      {{{"FLOTILLA_BIND", ""}}, {"FLOTILLA_BIND", "''"}},
      {{{"FLOTILLA_SOCKET_BUFFER", "lots"}}, {"FLOTILLA_SOCKET_BUFFER", "'lots'"}},
      {{{"FLOTILLA_UNSENT_LIMIT", "64k"}}, {"FLOTILLA_UNSENT_LIMIT", "'64k'", "a number of bytes"}},
      {{{"FLOTILLA_READ_WHILE_SENDING", "yes"}}, {"FLOTILLA_READ_WHILE_SENDING", "'yes'", "0 or 1"}},
      {{{"FLOTILLA_SHARED_MEMORY", "yes"}}, {"FLOTILLA_SHARED_MEMORY", "'yes'", "auto, on, off or a number of bytes"}},
      {{{"FLOTILLA_SHARED_MEMORY", "-5"}}, {"FLOTILLA_SHARED_MEMORY", "'-5'"}},
      {{{"FLOTILLA_SPIN_US", "fast"}}, {"FLOTILLA_SPIN_US", "'fast'", "microseconds"}},
      {{{"FLOTILLA_SPIN_US", "2000000"}}, {"FLOTILLA_SPIN_US", "'2000000'", "at most 1000000"}},
  };
  for (const auto& c : cases) {
    ScopedEnv env({});
    for (const auto& [k, v] : c.env) ::setenv(k, v, 1);
    const std::string msg = config_error([] { (void)TcpOptions::from_environment(); });
    CAPTURE(msg);
    for (const auto& e : c.expected) CHECK(contains(msg, e));
  }
}

TEST_CASE("options: torchrun's, Open MPI's and Slurm's variables form the job") {
  using flotilla::transport::Launcher;
  using flotilla::transport::launch_environment;
  {
    ScopedEnv env({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "10.1.2.3"}, {"MASTER_PORT", "29400"}});
    const auto l = launch_environment();
    CHECK(l.launcher == Launcher::torchrun);
    CHECK(l.rank == 3);
    CHECK(l.world_size == 8);
    CHECK(l.local_rank == std::optional<std::size_t>(1));
    const auto o = TcpOptions::from_environment();
    CHECK(o.rank == 3);
    CHECK(o.world_size == 8);
    CHECK(o.coordinator == "10.1.2.3:29400");
  }
  {
    ScopedEnv env({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                   {"FLOTILLA_COORDINATOR", "127.0.0.1:7000"}});
    const auto o = TcpOptions::from_environment();
    CHECK(o.rank == 1);
    CHECK(o.world_size == 2);
    CHECK(o.coordinator == "127.0.0.1:7000");  // FLOTILLA_COORDINATOR where the launcher gives none
    CHECK(launch_environment().launcher == Launcher::open_mpi);
  }
  {
    ScopedEnv env({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "2"},
                   {"MASTER_ADDR", "::1"}, {"MASTER_PORT", "29500"}});
    const auto o = TcpOptions::from_environment();
    CHECK(o.rank == 5);
    CHECK(o.world_size == 6);
    CHECK(o.coordinator == "[::1]:29500");
    CHECK(launch_environment().local_rank == std::optional<std::size_t>(2));
  }
  {
    // A batch script (no job step) is one process, whatever its allocation.
    ScopedEnv env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "16"}});
    CHECK(launch_environment().launcher == Launcher::none);
    CHECK(TcpOptions::from_environment().world_size == 1);
  }
  {
    // Nested: torchrun's 8 processes inside an srun step of 2 tasks (one a host): torchrun's is the job.
    ScopedEnv env({{"RANK", "6"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "2"}, {"MASTER_ADDR", "n1"}, {"MASTER_PORT", "1234"},
                   {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}});
    const auto l = launch_environment();
    CHECK(l.launcher == Launcher::torchrun);
    CHECK(l.rank == 6);
    // flotilla's own variables, where given, are the innermost launcher's: one process alone
    // cannot be one of torchrun's eight.
    ::setenv("FLOTILLA_RANK", "0", 1);
    ::setenv("FLOTILLA_WORLD_SIZE", "1", 1);
    CHECK_THROWS_WITH_AS(launch_environment(), doctest::Contains("contradict"), flotilla::ConfigError);
  }
  // Contradictions and partial conventions stop with the variables named.
  struct Case {
    std::vector<std::pair<const char*, const char*>> env;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {{{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}},
       {"torchrun's RANK=1 WORLD_SIZE=4", "Slurm's SLURM_PROCID=2 SLURM_NTASKS=4", "contradict"}},
      {{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}},
       {"torchrun's RANK=1 WORLD_SIZE=2", "OMPI_COMM_WORLD_SIZE=4", "contradict"}},
      {{{"RANK", "1"}}, {"torchrun", "RANK=1", "WORLD_SIZE is missing"}},
      {{{"LOCAL_RANK", "0"}}, {"torchrun", "LOCAL_RANK=0", "RANK is missing"}},
      {{{"RANK", "4"}, {"WORLD_SIZE", "4"}}, {"RANK=4 WORLD_SIZE=4", "0 to 3"}},
      {{{"RANK", "1"}, {"WORLD_SIZE", "two"}}, {"WORLD_SIZE=two", "not a number"}},
      {{{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "3"}}, {"LOCAL_RANK=3", "local rank is above the rank"}},
      {{{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "h"}}, {"MASTER_ADDR=h", "MASTER_PORT"}},
      {{{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}, {"MASTER_PORT=70000", "not a port"}},
      // A launcher with several processes and no coordinator: no silent lone training.
      {{{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}},
       {"rank 2 of 4", "Open MPI's OMPI_COMM_WORLD_RANK=2 OMPI_COMM_WORLD_SIZE=4", "MASTER_ADDR", "FLOTILLA_COORDINATOR"}},
  };
  for (const auto& c : cases) {
    std::string message;
    {
      ScopedEnv env({});
      for (const auto& [k, v] : c.env) ::setenv(k, v, 1);
      try {
        (void)TcpOptions::from_environment();
      } catch (const flotilla::ConfigError& e) {
        message = e.what();
      }
    }
    CAPTURE(message);
    REQUIRE_FALSE(message.empty());
    for (const auto& part : c.expected) CHECK(message.find(part) != std::string::npos);
  }
}

TEST_CASE("options: as command-line flags, with the environment as fallback") {
  {
    ScopedEnv env({{"FLOTILLA_TIMEOUT_MS", "777"}});
    cli::Flags flags("prog", "test");
    auto& epochs = flags.add<int>("epochs", 1, "an option of the program's own");
    transport::TcpFlags tcp(flags);
    const char* argv[] = {"prog", "--rank", "1", "--world-size=3", "--coordinator", "127.0.0.1:4000", "--epochs", "5",
                          "--spin-us", "0"};
    REQUIRE(flags.parse(10, argv, std::cout));
    const auto o = tcp.options();
    CHECK(epochs == 5);
    CHECK(o.rank == 1);
    CHECK(o.world_size == 3);
    CHECK(o.coordinator == "127.0.0.1:4000");
    CHECK(o.timeout == std::chrono::milliseconds(777));
    CHECK(o.spin == std::chrono::microseconds(0));
    CHECK(contains(flags.help(), "--coordinator"));
    CHECK(contains(flags.help(), "FLOTILLA_COORDINATOR"));
  }
  {
    ScopedEnv env({});
    cli::Flags flags("prog", "test");
    transport::TcpFlags tcp(flags);
    const char* argv[] = {"prog", "--rank", "x", "--world-size", "2"};
    REQUIRE(flags.parse(5, argv, std::cout));
    const std::string msg = config_error([&] { (void)tcp.options(); });
    CHECK(contains(msg, "--rank (FLOTILLA_RANK)"));
    CHECK(contains(msg, "'x'"));
  }
}

TEST_CASE("options: --rejoin names the ranks to reconnect to, FLOTILLA_REJOIN as fallback") {
  const char* base[] = {"prog", "--rank", "2", "--world-size", "4", "--coordinator", "127.0.0.1:4000"};
  auto parsed = [&](std::vector<const char*> extra) {
    cli::Flags flags("prog", "test");
    transport::TcpFlags tcp(flags);
    std::vector<const char*> argv(std::begin(base), std::end(base));
    argv.insert(argv.end(), extra.begin(), extra.end());
    REQUIRE(flags.parse(static_cast<int>(argv.size()), argv.data(), std::cout));
    CHECK(contains(flags.help(), "--rejoin"));
    return tcp.options();
  };
  {
    ScopedEnv env({{"FLOTILLA_REJOIN", "127.0.0.1:9"}});
    CHECK(parsed({"--rejoin", "127.0.0.1:36123,,127.0.0.1:46743"}).rejoin ==
          std::vector<std::string>{"127.0.0.1:36123", "127.0.0.1:46743"});
    CHECK(parsed({}).rejoin == std::vector<std::string>{"127.0.0.1:9"});
  }
  {
    ScopedEnv env({});
    CHECK(parsed({}).rejoin.empty());
    const std::string msg = config_error([&] { (void)parsed({"--rejoin", "127.0.0.1:36123,server3"}); });
    CHECK(contains(msg, "--rejoin (FLOTILLA_REJOIN): 'server3' is not host:port"));
  }
  {
    ScopedEnv env({{"FLOTILLA_REJOIN", "127.0.0.1:0"}});
    CHECK(contains(config_error([] { (void)TcpOptions::from_environment(); }), "FLOTILLA_REJOIN: '127.0.0.1:0'"));
  }
}

TEST_CASE("options: run() checks the world size it was launched with") {
  TcpOptions o;  // world size 1: a process started by hand, without the launcher
  const std::string msg = config_error([&] { Tcp::run(o, 4, [](TcpEndpoint&) {}); });
  CHECK(contains(msg, "needs 4 ranks"));
  CHECK(contains(msg, "rank 0 of 1"));
  CHECK(contains(msg, "flotilla-launch -n 4"));
  // 0 ranks: the job as launched (here one process started by hand).
  std::size_t seen = 0;
  Tcp::run(o, 0, [&](TcpEndpoint& e) { seen = e.size(); });
  CHECK(seen == 1);
  o.world_size = 2;
  o.rank = 1;
  CHECK(contains(config_error([&] { Tcp::run(o, 2, [](TcpEndpoint&) {}); }), "FLOTILLA_COORDINATOR"));
  // Hosts that the other ranks' decoders would refuse are refused here first, by name.
  o.coordinator = "node\x01:29500";
  CHECK(contains(config_error([&] { Tcp::run(o, 2, [](TcpEndpoint&) {}); }), "FLOTILLA_COORDINATOR"));
  o.coordinator = "127.0.0.1:29500";
  o.bind = "my host";
  CHECK(contains(config_error([&] { Tcp::run(o, 2, [](TcpEndpoint&) {}); }), "FLOTILLA_BIND) 'my host'"));
  o.bind = "127.0.0.1";
  // One rank needs no network: a program run by hand is a job of one.
  TcpOptions one;
  int calls = 0;
  Tcp::run(one, 1, [&](TcpEndpoint& e) {
    ++calls;
    CHECK(e.rank() == 0);
    CHECK(e.size() == 1);
    std::vector<std::byte> in(3);
    const std::byte out[3] = {std::byte{1}, std::byte{2}, std::byte{3}};
    e.sendrecv(0, 1, out, 0, in);
    CHECK(in[2] == std::byte{3});
    e.barrier();
  });
  CHECK(calls == 1);
}

// ---- wire format ---------------------------------------------------------------------------------

TEST_CASE("wire: headers and control payloads round-trip; corruption is detected") {
  wire::Header h;
  h.type = wire::FrameType::data;
  h.tag = 0xDEADBEEF;
  h.aux = 7;
  h.sequence = 1ull << 40;
  h.fingerprint = 0x0123456789ABCDEFull;
  h.payload_length = 1ull << 33;
  const auto bytes = wire::encode(h);
  static_assert(std::tuple_size_v<wire::HeaderBytes> == 48);
  CHECK(bytes[0] == std::byte{'F'});
  CHECK(bytes[3] == std::byte{'T'});
  CHECK(bytes[8] == std::byte{0xEF});  // little-endian on every host
  auto d = wire::decode(bytes);
  CHECK(d.problem().empty());
  CHECK(d.header == h);
  for (std::size_t i = 0; i < wire::header_size; ++i) {  // any flipped bit is caught
    auto bad = bytes;
    bad[i] ^= std::byte{0x10};
    CAPTURE(i);
    CHECK(!wire::decode(bad).problem().empty());
  }
  auto bad = bytes;
  bad[0] = std::byte{'G'};
  CHECK(contains(wire::decode(bad).problem(), "bad magic"));
  bad = bytes;
  bad[20] ^= std::byte{1};
  CHECK(contains(wire::decode(bad).problem(), "bad header CRC"));

  const wire::Hello hello{4, 3, 99, 4242, "node7.example"};
  CHECK(wire::decode_hello(wire::encode_hello(hello)) == hello);
  auto hb = wire::encode_hello(hello);
  hb.pop_back();
  CHECK(!wire::decode_hello(hb));
  const wire::Table table{12345, {{"a", 1}, {"10.0.0.2", 2}, {"::1", 3}}};
  CHECK(wire::decode_table(wire::encode_table(table)) == table);
  auto tb = wire::encode_table(table);
  tb[8] = std::byte{0xFF};  // an entry count far beyond the payload: refused before reserving
  CHECK(!wire::decode_table(tb));

  // Hosts are printable ASCII without spaces, at most 255 bytes (or empty): a control character,
  // a space, a byte above 0x7e or an overlong name makes the frame malformed.
  CHECK(wire::decode_hello(wire::encode_hello(wire::Hello{4, 3, 99, 0, ""})));
  CHECK(wire::decode_hello(wire::encode_hello(wire::Hello{4, 3, 99, 1, "fe80::1%eth0"})));
  CHECK(wire::decode_hello(wire::encode_hello(wire::Hello{4, 3, 99, 1, std::string(255, 'h')})));
  for (const std::string& host : {std::string("node\x01"), std::string("\x7f\x01\x02\x03\x04\x05\x06"),
                                std::string("my host"), std::string("h\xc3\xa9te"), std::string(256, 'h'),
                                std::string("node\0x", 6)}) {
    CAPTURE(host);
    CHECK(!wire::decode_hello(wire::encode_hello(wire::Hello{4, 3, 99, 4242, host})));
    CHECK(!wire::decode_table(wire::encode_table(wire::Table{7, {{"a", 1}, {host, 2}}})));
  }
}

TEST_CASE("wire: every header is judged before its payload: version, bounds per kind, payload CRC") {
  auto judged = [](wire::Header h) { return wire::header_problem(wire::decode(wire::encode(h)), 1000); };
  wire::Header h;
  h.type = wire::FrameType::data;
  h.payload_length = 1000;
  CHECK(judged(h).empty());
  h.payload_length = 1001;
  CHECK(contains(judged(h), "a data frame of 1001 bytes (at most 1000)"));
  h.type = wire::FrameType::hello;
  h.payload_length = wire::max_control_payload + 1;
  CHECK(contains(judged(h), "a hello frame of 1048577 bytes"));
  for (const auto t : {wire::FrameType::heartbeat, wire::FrameType::barrier, wire::FrameType::goodbye}) {
    h.type = t;
    h.payload_length = 1;
    CHECK(contains(judged(h), "-byte payload"));
  }
  h.type = wire::FrameType::auth;
  h.payload_length = 31;
  CHECK(contains(judged(h), "an auth frame of 31 bytes"));
  h.payload_length = 32;
  CHECK(judged(h).empty());
  h.version = 1;
  CHECK(contains(judged(h), "protocol version 1, this side speaks version " + std::to_string(wire::protocol_version)));
  // The payload CRC: set by seal_payload, checked by payload_problem; a frame without the flag is
  // not checked.
  std::vector<std::byte> p(100, std::byte{1});
  wire::Header d;
  d.type = wire::FrameType::data;
  CHECK(wire::payload_problem(d, p).empty());
  wire::seal_payload(d, p);
  CHECK((d.flags & wire::header_flags::payload_crc) != 0);
  CHECK(wire::payload_problem(d, p).empty());
  p[50] = std::byte{2};
  CHECK(contains(wire::payload_problem(d, p), "bad payload CRC"));
  // A hello carries the auth flag and the nonce; any other auth value is malformed.
  wire::Hello hello{4, 3, 99, 4242, "node7.example", 1, {}};
  hello.nonce[31] = 9;
  auto bytes = wire::encode_hello(hello);
  CHECK(wire::decode_hello(bytes) == hello);
  bytes[bytes.size() - 33] = std::byte{2};
  CHECK(!wire::decode_hello(bytes));
}

// ---- handshake -------------------------------------------------------------------------------------

TEST_CASE("handshake: a world-size mismatch is refused with both sizes") {
  const auto port = transport::pick_free_port();
  RankThread r0(job(0, 2, port), [](TcpEndpoint&) {});
  RankThread r1(job(1, 3, port), [](TcpEndpoint&) {});
  const std::string e0 = r0.error(), e1 = r1.error();
  CAPTURE(e0);
  CAPTURE(e1);
  for (const auto& e : {e0, e1}) {
    CHECK(contains(e, "world size mismatch"));
    CHECK(contains(e, "world size 3"));
    CHECK(contains(e, "world size 2"));
  }
  CHECK(contains(e0, "tcp rank 0 of 2"));
  CHECK(contains(e1, "tcp rank 1 of 3"));
}

TEST_CASE("handshake: a protocol-version mismatch is refused with both versions, on either side") {
  {  // a peer of another version registers with rank 0: refused, told why, and the job goes on
    const auto port = transport::pick_free_port();
    Log log;
    auto o0 = job(0, 2, port);
    o0.log = log.sink();
    RankThread r0(o0, [](TcpEndpoint& e) { e.barrier(); });
    FakePeer peer(port);
    peer.hello(2, 1, wire::protocol_version + 1);
    const auto reply = peer.read();
    REQUIRE(reply);
    CHECK(reply->first.type == wire::FrameType::refuse);
    CHECK(contains(reply->second, "version " + std::to_string(wire::protocol_version + 1)));
    CHECK(contains(reply->second, "version " + std::to_string(wire::protocol_version)));
    CHECK(peer.closed());
    RankThread r1(job(1, 2, port), [](TcpEndpoint& e) { e.barrier(); });
    CHECK(r0.error() == "");
    CHECK(r1.error() == "");
    CAPTURE(log.text());
    CHECK(log.count() == 1);
    CHECK(log.has("protocol version mismatch"));
    CHECK(log.has("a connection from 127.0.0.1:"));
  }
  {  // a coordinator of another version answers rank 1
    auto io = std::make_shared<boost::asio::io_context>();
    transport::tcp::detail::Listener l = transport::tcp::detail::listen_on(*io, "127.0.0.1", 0, 0, "fake coordinator");
    RankThread r1(job(1, 2, l.port), [](TcpEndpoint&) {});
    REQUIRE(transport::tcp::detail::wait_ready(*io, l.acceptor, l.acceptor.wait_read, Clock::now() + std::chrono::seconds(5)));
    auto accepted = transport::tcp::detail::accept_one(l.acceptor);
    REQUIRE(accepted);
    FakePeer coordinator(io, std::move(*accepted));
    const auto hello = coordinator.read();
    REQUIRE(hello);
    CHECK(hello->first.type == wire::FrameType::hello);
    coordinator.hello(2, 0, wire::protocol_version + 1);
    const std::string e1 = r1.error();
    CAPTURE(e1);
    CHECK(contains(e1, "tcp rank 1 of 2"));
    CHECK(contains(e1, "protocol version mismatch"));
    CHECK(contains(e1, "rank 0 (the coordinator) at 127.0.0.1:" + std::to_string(l.port)));
    const auto refusal = coordinator.read();  // and it says so to the coordinator
    REQUIRE(refusal);
    CHECK(refusal->first.type == wire::FrameType::refuse);
  }
}

TEST_CASE("handshake: two processes with the same rank are refused") {
  const auto port = transport::pick_free_port();
  RankThread r0(job(0, 3, port), [](TcpEndpoint&) {});
  RankThread a(job(1, 3, port), [](TcpEndpoint&) {});
  RankThread b(job(1, 3, port), [](TcpEndpoint&) {});
  const std::string e0 = r0.error();
  CAPTURE(e0);
  CHECK(contains(e0, "rank 1 registered twice"));
  CHECK(!a.error().empty());
  CHECK(!b.error().empty());
}

TEST_CASE("handshake: a rendezvous with a missing rank times out naming it") {
  const auto port = transport::pick_free_port();
  auto o = job(0, 3, port);
  o.connect_timeout = std::chrono::milliseconds(300);
  auto o1 = job(1, 3, port);
  o1.connect_timeout = std::chrono::milliseconds(300);
  const auto t0 = Clock::now();
  RankThread r0(o, [](TcpEndpoint&) {});
  RankThread r1(o1, [](TcpEndpoint&) {});
  const std::string e0 = r0.error();
  CAPTURE(e0);
  CHECK(contains(e0, "timed out after 300 ms"));
  CHECK(contains(e0, "rank(s) 2 did not register"));
  CHECK(contains(r1.error(), "timed out"));
  CHECK(ms_since(t0) < 3000);
}

// ---- hostile input ---------------------------------------------------------------------------------

namespace {

/// Runs a job of two ranks with a coordinator that logs to `log`; `attack(port)` runs while rank 0
/// waits for rank 1 to register; rank 1 starts after it. Both must then complete an exchange.
void survive(const std::function<void(std::uint16_t)>& attack, Log& log, const std::string& secret = "") {
  const auto port = transport::pick_free_port();
  auto o0 = job(0, 2, port), o1 = job(1, 2, port);
  o0.log = log.sink();
  o0.secret = o1.secret = secret;
  o0.connect_timeout = std::chrono::seconds(60);
  auto body = [](TcpEndpoint& e) {
    std::vector<std::byte> b(1000, std::byte{static_cast<unsigned char>(e.rank())}), in(1000);
    e.sendrecv(1 - e.rank(), 3, b, 1 - e.rank(), in);
    if (in[0] != std::byte{static_cast<unsigned char>(1 - e.rank())}) throw std::runtime_error("wrong data");
  };
  RankThread r0(o0, body);
  attack(port);
  RankThread r1(o1, body);
  CHECK(r0.error() == "");
  CHECK(r1.error() == "");
}

}  // namespace

TEST_CASE("hostile: garbage sent to a listening rank is dropped and logged; the job goes on") {
  Log log;
  survive(
      [](std::uint16_t port) {
        FakePeer peer(port);
        peer.write(bytes_of("GET / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curious\r\n\r\n"));
        CHECK(peer.closed());
      },
      log);
  CAPTURE(log.text());
  CHECK(log.count() == 1);
  CHECK(log.has("bad magic number"));
  CHECK(log.has("a connection from 127.0.0.1:"));
  CHECK(log.has("dropped it"));
}

TEST_CASE("hostile: a header with a bad CRC, or announcing a huge payload, is dropped before reading on") {
  Log log;
  survive(
      [](std::uint16_t port) {
        {
          FakePeer peer(port);
          wire::Header h;
          h.type = wire::FrameType::hello;
          peer.frame(h, wire::encode_hello({2, 1, 0, 1, "127.0.0.1"}), /*break_crc=*/true);
          CHECK(peer.closed());
        }
        {
          FakePeer peer(port);
          wire::Header h;
          h.type = wire::FrameType::hello;
          h.payload_length = 1ull << 40;  // a terabyte: must not be allocated
          peer.write(wire::encode(h));
          CHECK(peer.closed());
        }
      },
      log);
  CAPTURE(log.text());
  CHECK(log.count() == 2);
  CHECK(log.has("bad header CRC"));
  CHECK(log.has("1099511627776 bytes"));
}

namespace {

/// A fake rank 1 that registers properly with a real rank 0 and answers the shared-memory setup
/// ("off"), then sends what a test wants: its data frames are numbered from `first_sequence`.
struct RegisteredFake {
  static constexpr std::uint64_t first_sequence = 3;  // after the setup's two
  FakePeer peer;
  std::string plan;  // rank 0's answer to `offer`
  explicit RegisteredFake(std::uint16_t port, const std::string& offer = "off 1048576 fake-host") : peer(port) {
    peer.hello(2, 1);
    const auto hello = peer.read();
    REQUIRE(hello);
    REQUIRE(hello->first.type == wire::FrameType::hello);
    const auto table = peer.read();
    REQUIRE(table);
    REQUIRE(table->first.type == wire::FrameType::table);
    const std::size_t length = offer.size();
    data(transport::tcp::detail::shared_memory_setup_tag, 1, std::as_bytes(std::span<const std::size_t>(&length, 1)));
    data(transport::tcp::detail::shared_memory_setup_tag, 2, std::as_bytes(std::span<const char>(offer.data(), offer.size())));
    for (int frames = 0; frames < 2;) {  // rank 0's plan, length then text; heartbeats may come between
      const auto f = peer.read();
      REQUIRE(f);
      if (f->first.type != wire::FrameType::data) continue;
      CHECK(f->first.tag == transport::tcp::detail::shared_memory_setup_tag);
      if (++frames == 2) plan = f->second;
    }
  }
  void data(Tag tag, std::uint64_t sequence, std::span<const std::byte> payload, bool break_crc = false) {
    wire::Header h;
    h.type = wire::FrameType::data;
    h.tag = tag;
    h.sequence = sequence;
    peer.frame(h, payload, break_crc);
  }
};

}  // namespace

TEST_CASE("hostile: a bad frame on an established connection fails the receive, naming the peer") {
  const std::vector<std::byte> payload(64, std::byte{7});
  struct Case {
    const char* name;
    std::function<void(RegisteredFake&)> send;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"bad CRC", [&](RegisteredFake& f) { f.data(5, RegisteredFake::first_sequence, payload, true); }, "bad header CRC"},
      {"out of sequence", [&](RegisteredFake& f) { f.data(5, 9, payload); }, "frame number 9 where 3 was due"},
      {"unexpected hello", [&](RegisteredFake& f) {
         wire::Header h;
         h.type = wire::FrameType::hello;
         h.sequence = RegisteredFake::first_sequence;
         f.peer.frame(h, wire::encode_hello({2, 1, 0, 1, "127.0.0.1"}));
       },
       "unexpected hello frame"},
      {"too large", [&](RegisteredFake& f) {
         wire::Header h;
         h.type = wire::FrameType::data;
         h.tag = 9;  // no receive waits for tag 9: it would have to be held in memory
         h.sequence = RegisteredFake::first_sequence;
         h.payload_length = 1u << 20;
         f.peer.write(wire::encode(h));
       },
       "a message of 1048576 bytes (tag 9), more than the 1024 bytes"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const auto port = transport::pick_free_port();
    auto o = job(0, 2, port);
    o.max_message_bytes = 1024;
    std::string in_body;
    RankThread r0(o, [&](TcpEndpoint& e) {
      std::vector<std::byte> b(64);
      try {
        e.recv(1, 5, b);
      } catch (const TransportError& err) {
        in_body = err.what();
        throw;
      }
    });
    RegisteredFake fake(port);
    CHECK(fake.plan == "skip");
    c.send(fake);
    CHECK(fake.peer.closed());
    const std::string e0 = r0.error();
    CAPTURE(e0);
    CHECK(contains(e0, c.expected));
    CHECK(contains(e0, "tcp rank 0 of 2: recv from rank 1 at 127.0.0.1:1 (tag 5) failed: rank 1 at 127.0.0.1:1"));
  }
}

TEST_CASE("failure: a message cut short by a lost peer is dropped; later receives do not wait for its rest") {
  // Rank 1 (a fake) sends the first 1000 bytes of a 1 MiB message of tag 7 and exits, while rank 0
  // waits for tag 5. Rank 0 goes on without lost peers (as a parameter server does): the receives
  // of tag 7 that follow must fail at once, not take the half message and wait for the rest on a
  // closed connection until they time out (or, once a new rank 1 rejoins, on its connection).
  const auto port = transport::pick_free_port();
  std::string first, from_it, from_any;
  long long from_it_ms = -1, from_any_ms = -1;
  RankThread r0(job(0, 2, port), [&](TcpEndpoint& e) {
    e.continue_without_lost_peers(true);
    std::vector<std::byte> small(64), big(1u << 20);
    auto error_of = [&](const std::function<void()>& f, long long& ms) {
      const auto t0 = Clock::now();
      try {
        f();
      } catch (const TransportError& x) {
        ms = ms_since(t0);
        return std::string(x.what());
      }
      return std::string("no error");
    };
    long long ignored = 0;
    first = error_of([&] { e.recv(1, 5, small); }, ignored);
    from_it = error_of([&] { e.recv(1, 7, big); }, from_it_ms);
    from_any = error_of([&] { (void)e.recv_any(7, big); }, from_any_ms);
  });
  RegisteredFake fake(port);
  wire::Header h;
  h.type = wire::FrameType::data;
  h.tag = 7;
  h.sequence = RegisteredFake::first_sequence;
  h.payload_length = 1u << 20;
  fake.peer.write(wire::encode(h));
  fake.peer.write(std::vector<std::byte>(1000, std::byte{3}));
  fake.peer.hang_up();
  CHECK(r0.error() == "");
  CAPTURE(first);
  CAPTURE(from_it);
  CAPTURE(from_any);
  CHECK(contains(first, "rank 1 at 127.0.0.1:1 closed the connection in the middle of a frame"));
  CHECK(contains(from_it, "recv from rank 1 at 127.0.0.1:1 (tag 7) failed: rank 1 at 127.0.0.1:1 was lost earlier"));
  CHECK(contains(from_any, "every other rank has finished (said goodbye) or was lost"));
  CHECK(from_it_ms < 1000);  // the timeout is 5 s
  CHECK(from_any_ms < 1000);
}

TEST_CASE("wire: data frames carry a payload CRC as checksum_data says: not between ranks of one host by default") {
  using transport::tcp::DataChecksums;
  for (const auto setting : {DataChecksums::other_hosts, DataChecksums::all, DataChecksums::off}) {
    CAPTURE(static_cast<int>(setting));
    const auto port = transport::pick_free_port();
    auto o = job(0, 2, port);
    o.checksum_data = setting;
    const std::vector<std::byte> payload(1000, std::byte{9});
    RankThread r0(o, [&](TcpEndpoint& e) { e.send(1, 5, payload); });
    RegisteredFake fake(port);
    std::optional<std::pair<wire::Header, std::string>> f;
    do {
      f = fake.peer.read();
    } while (f && f->first.type == wire::FrameType::heartbeat);
    REQUIRE(f);
    CHECK(f->first.type == wire::FrameType::data);
    CHECK(f->first.payload_length == 1000);
    const bool sealed = (f->first.flags & wire::header_flags::payload_crc) != 0;
    CHECK(sealed == (setting == DataChecksums::all));  // loopback: on this host
    if (sealed)
      CHECK(f->first.payload_crc == flotilla::crc32c(std::as_bytes(std::span<const char>(f->second.data(), f->second.size()))));
    wire::Header bye;  // so that rank 0's close completes
    bye.type = wire::FrameType::goodbye;
    bye.sequence = RegisteredFake::first_sequence;
    fake.peer.frame(bye, {});
    CHECK(r0.error() == "");
  }
}

// ---- failures and timeouts ---------------------------------------------------------------------------

TEST_CASE("failure: a receive with no sender times out within the bound, naming rank, peer and operation") {
  const auto port = transport::pick_free_port();
  auto o0 = job(0, 2, port), o1 = job(1, 2, port);
  o0.timeout = std::chrono::milliseconds(300);  // rank 1 waits in the barrier meanwhile, with 5 s
  std::string caught;
  long long took = 0;
  RankThread r0(o0, [&](TcpEndpoint& e) {
    std::vector<std::byte> b(4);
    const auto t0 = Clock::now();
    try {
      e.recv(1, 9, b);
    } catch (const TransportError& err) {
      caught = err.what();
      took = ms_since(t0);
    }
    // The endpoint is still usable after a receive timed out.
    e.set_timeout(std::chrono::seconds(5));
    e.barrier();
  });
  RankThread r1(o1, [&](TcpEndpoint& e) { e.barrier(); });
  CHECK(r0.error() == "");
  CHECK(r1.error() == "");
  CAPTURE(caught);
  CHECK(contains(caught, "tcp rank 0 of 2: recv from rank 1 at 127.0.0.1:"));
  CHECK(contains(caught, "(tag 9) timed out after 300 ms"));
  CHECK(took >= 300);
  CHECK(took < 1500);
}

TEST_CASE("failure: a failing rank's error reaches the others at once, and run() rethrows its own") {
  const auto port = transport::pick_free_port();
  std::vector<std::unique_ptr<RankThread>> ranks;
  std::atomic<int> woken{0};
  const auto t0 = Clock::now();
  for (std::size_t r = 0; r < 3; ++r)
    ranks.push_back(std::make_unique<RankThread>(job(r, 3, port), [&](TcpEndpoint& e) {
      if (e.rank() == 2) {
        e.barrier();
        throw std::runtime_error("rank two broke");
      }
      std::vector<std::byte> b(4);
      try {
        // The failure may reach a rank while it still finishes the barrier, or in the receive,
        // which is never matched: either way at once, not after the timeout.
        e.barrier();
        e.recv(2, 1, b);
      } catch (const TransportError& err) {
        if (contains(err.what(), "rank 2 failed: rank two broke")) ++woken;
        throw;
      }
    }));
  CHECK(ranks[2]->error() == "rank two broke");
  CHECK(contains(ranks[0]->error(), "rank 2 failed: rank two broke"));
  CHECK(contains(ranks[1]->error(), "rank 2 failed: rank two broke"));
  CHECK(woken == 2);
  CHECK(ms_since(t0) < 3000);  // not the 5 s timeout
}

TEST_CASE("failure: a wrong-sized message is consumed, and the endpoint stays usable; counters split payload and framing") {
  const auto port = transport::pick_free_port();
  TrafficCounters c0{}, c1{};
  RankThread r1(job(1, 2, port), [&](TcpEndpoint& e) {
    const auto start = e.counters();
    std::vector<std::byte> big(3u << 20, std::byte{1});
    e.send(0, 1, big);   // to a receive of another size
    e.send(0, 1, std::vector<std::byte>(5, std::byte{2}));
    e.barrier();
    c1 = e.counters() - start;
  });
  RankThread r0(job(0, 2, port), [&](TcpEndpoint& e) {
    const auto start = e.counters();
    std::vector<std::byte> small(16);
    CHECK_THROWS_WITH_AS(e.recv(1, 1, small), doctest::Contains("expected 16 bytes, the message has 3145728"), TransportError);
    std::vector<std::byte> five(5);
    e.recv(1, 1, five);
    CHECK(five[4] == std::byte{2});
    e.barrier();
    c0 = e.counters() - start;
  });
  CHECK(r0.error() == "");
  CHECK(r1.error() == "");
  CHECK(c1.payload_bytes_sent == (3u << 20) + 5);
  CHECK(c1.messages_sent == 2);
  CHECK(c0.payload_bytes_received == (3u << 20) + 5);
  CHECK(c0.messages_received == 2);
  CHECK(c1.header_bytes_sent == c0.header_bytes_received);   // both messages and the barrier token
  CHECK(c1.header_bytes_sent == 3 * wire::header_size);
}

namespace {

struct Captured {
  std::mutex m;
  std::map<std::size_t, std::vector<std::string>> lines;  // by rank; stderr lines start "2| "
  std::vector<std::string> messages;
  std::string of(std::size_t rank) {
    std::string s;
    for (const auto& l : lines[rank]) s += l + "\n";
    return s;
  }
};

transport::LaunchOptions launch_options(std::size_t ranks, std::vector<std::string> args, Captured& cap) {
  transport::LaunchOptions o;
  o.ranks = ranks;
  o.command = {FLOTILLA_TCP_RANK_PROGRAM};
  for (auto& a : args) o.command.push_back(std::move(a));
  o.grace = std::chrono::milliseconds(1000);
  o.timeout = std::chrono::seconds(30);
  o.on_output = [&cap](std::size_t rank, int stream, std::string_view line) {
    const std::lock_guard lock(cap.m);
    cap.lines[rank].push_back((stream == 2 ? "2| " : "") + std::string(line));
  };
  o.on_message = [&cap](const std::string& m) {
    const std::lock_guard lock(cap.m);
    cap.messages.push_back(m);
  };
  return o;
}

/// The number in "caught after <n> ms", or -1.
long long caught_after(const std::string& out) {
  const auto at = out.find("caught after ");
  if (at == std::string::npos) return -1;
  return std::stoll(out.substr(at + 13));
}

/// Checks what every survivor of a killed peer must show: it caught the TransportError (status 3),
/// named itself, and did so at once (well before the 30 s timeout). Returns its output.
std::string check_survivor(const transport::LaunchResult& result, Captured& cap, std::size_t r, std::size_t ranks) {
  const std::string out = cap.of(r);
  CAPTURE(r);
  CAPTURE(out);
  CHECK(result.ranks[r].exited);
  CHECK(result.ranks[r].status == 3);
  CHECK(contains(out, "tcp rank " + std::to_string(r) + " of " + std::to_string(ranks)));
  const long long ms = caught_after(out);
  CHECK(ms >= 0);
  CHECK(ms < 1500);
  return out;
}

}  // namespace

TEST_CASE("failure: a peer killed with SIGKILL mid-job fails the others at once, naming it") {
  Captured cap;
  auto o = launch_options(3, {"kill", "1"}, cap);
  o.stop_on_failure = false;  // let the survivors report
  const auto t0 = Clock::now();
  const auto result = transport::launch(o);
  CHECK(ms_since(t0) < 5000);
  REQUIRE(result.ranks.size() == 3);
  CHECK(!result.ranks[1].exited);
  CHECK(result.ranks[1].signal == SIGKILL);
  CHECK(result.first_failure == std::optional<std::size_t>(1));
  for (std::size_t r : {0u, 2u}) {
    const std::string out = check_survivor(result, cap, r, 3);  // the victim dies 200 ms in
    CAPTURE(out);
    CHECK(contains(out, "rank 1 at 127.0.0.1:"));
    CHECK(contains(out, "closed the connection"));
  }
}

TEST_CASE("shared memory across hosts: each host sums through its segment, the hosts' leaders over the sockets") {
  // Five ranks on three hosts, named as TcpOptions::host lets a job say: a = {0, 2}, b = {1, 4},
  // c = {3} (one rank alone: no segment). Pieces of 4 KiB (1024 floats), so that larger sums go in
  // several pieces, each through the three steps of host_allreduce.hpp.
  const std::vector<std::string> host_of{"a", "b", "a", "c", "b"};
  constexpr std::size_t n = 5, piece = 1024;
  const std::vector<std::size_t> leaders{0, 1, 3};
  const std::vector<std::size_t> sizes{1, 2, 7, 1000, piece, 3 * piece + 5};
  auto input = [](std::size_t r, std::size_t i, std::size_t call) {
    return static_cast<float>(static_cast<int>((r * 37 + i * 11 + call) % 201) - 100);
  };
  // The ring of 3 leaders: the leader at place p sends every chunk of a piece twice but chunks p+1
  // (in the reduce-scatter) and p+2 (in the allgather), chunks as collective/ring_allreduce.hpp cuts.
  auto ring_bytes = [&](std::size_t place, std::size_t values) {
    std::uint64_t bytes = 0;
    for (std::size_t at = 0; at < values; at += piece) {
      const std::size_t m = std::min(piece, values - at);
      auto chunk = [&](std::size_t c) { return m / 3 + (c % 3 < m % 3 ? 1 : 0); };
      bytes += (2 * m - chunk(place + 1) - chunk(place + 2)) * sizeof(float);
    }
    return bytes;
  };
  std::vector<std::vector<float>> results(n);
  std::vector<TrafficCounters> moved(n);
  std::vector<int> active(n, 0);
  const auto port = transport::pick_free_port();
  std::vector<std::unique_ptr<RankThread>> ranks;
  for (std::size_t r = 0; r < n; ++r) {
    auto o = job(r, n, port);
    o.host = host_of[r];
    o.shared_memory_bytes = piece * sizeof(float);
    ranks.push_back(std::make_unique<RankThread>(o, [&, r](TcpEndpoint& e) {
      active[r] = e.shared_memory_active() ? 1 : 0;
      const auto before = e.counters();
      std::size_t call = 0;
      for (std::size_t round = 0; round < 5; ++round)
        for (std::size_t values : sizes) {
          std::vector<float> v(values), expected(values, 0.0f);
          for (std::size_t i = 0; i < values; ++i) {
            v[i] = input(r, i, call);
            for (std::size_t k = 0; k < n; ++k) expected[i] += input(k, i, call);  // exact: small integers
          }
          collective::ring_allreduce<codec::Fp32>(e, std::span<float>(v));
          if (v != expected) throw std::runtime_error("wrong sum of " + std::to_string(values) + " values in call " + std::to_string(call));
          ++call;
        }
      moved[r] = e.counters() - before;
      // Sums that round: every rank ends with the same bits.
      std::vector<float> v(2 * piece + 9);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = 1.0f / static_cast<float>(i + 3 * r + 1);
      collective::ring_allreduce<codec::Fp32>(e, std::span<float>(v));
      results[r] = v;
      // The endpoint's own sum is one host's: across hosts it refuses, pointing to the collective.
      const auto listed = e.host_leaders();
      if (!std::equal(listed.begin(), listed.end(), leaders.begin(), leaders.end()) || e.native_allreduce_max_bytes() != 0)
        throw std::runtime_error("the endpoint does not describe the job's hosts");
      try {
        e.allreduce_sum(v);
        throw std::runtime_error("allreduce_sum ran across hosts");
      } catch (const ConfigError& x) {
        if (!contains(x.what(), "this job spans 3 hosts: its sums are hierarchical")) throw;
      }
    }));
  }
  for (const auto& rank : ranks) CHECK(rank->error() == "");  // (joins)
  std::uint64_t summed = 0;
  for (std::size_t values : sizes) summed += 5 * values;
  for (std::size_t r = 0; r < n; ++r) {
    CAPTURE(r);
    CHECK(active[r] == 1);
    const auto place = std::find(leaders.begin(), leaders.end(), r);
    std::uint64_t expected_wire = 0;
    if (place != leaders.end())
      for (std::size_t round = 0; round < 5; ++round)
        for (std::size_t values : sizes) expected_wire += ring_bytes(static_cast<std::size_t>(place - leaders.begin()), values);
    CHECK(moved[r].payload_bytes_sent == expected_wire);  // the leaders' ring alone goes on the wire
    // Through a segment of two ranks each reads all of the other's values once a piece (the leader
    // its member's input, the member the total); rank 3 shares no memory.
    const std::uint64_t through_memory = r == 3 ? 0 : summed * sizeof(float);
    CHECK(moved[r].shared_memory_bytes_sent == through_memory);
    CHECK(moved[r].shared_memory_bytes_received == through_memory);
    CHECK(results[r].size() == results[0].size());
    CHECK(std::memcmp(results[r].data(), results[0].data(), results[0].size() * sizeof(float)) == 0);
  }
}

TEST_CASE("shared memory across hosts: a job that requires it with no two ranks on one host stops, saying so") {
  const auto port = transport::pick_free_port();
  std::vector<std::unique_ptr<RankThread>> ranks;
  for (std::size_t r = 0; r < 3; ++r) {
    auto o = job(r, 3, port);
    o.host = "host" + std::to_string(r);
    o.shared_memory = transport::tcp::SharedMemory::on;
    ranks.push_back(std::make_unique<RankThread>(o, [](TcpEndpoint&) {}));
  }
  for (std::size_t r = 0; r < 3; ++r) {
    const std::string e = ranks[r]->error();
    CAPTURE(e);
    CHECK(contains(e, "cannot set up the shared-memory allreduce"));
    CHECK(contains(e, "no two of the job's 3 ranks are on one host"));
  }
}

TEST_CASE("failure: a peer killed during shared-memory allreduces fails the others at once, naming it") {
  Captured cap;
  auto o = launch_options(3, {"shared-memory-kill", "1"}, cap);
  o.environment.push_back("FLOTILLA_SHARED_MEMORY=65536");
  o.stop_on_failure = false;  // let the survivors report
  const auto t0 = Clock::now();
  const auto result = transport::launch(o);
  CHECK(ms_since(t0) < 10000);
  REQUIRE(result.ranks.size() == 3);
  CHECK(result.ranks[1].signal == SIGKILL);
  for (std::size_t r : {0u, 2u}) {
    const std::string out = check_survivor(result, cap, r, 3);
    CAPTURE(out);
    // Rank 0 looks at rank 1 first. Rank 2 may find rank 0 gone too (it stops on seeing rank 1's
    // loss): the wait names a peer whose connection closed, not necessarily the first to fail.
    // Found by the wait's look at the sockets (closed its connection) or by reading them
    // (closed the connection), whichever comes first.
    CHECK((contains(out, "closed its connection during a shared-memory allreduce") || contains(out, "closed the connection")));
    if (r == 0)
      CHECK(contains(out, "rank 1 at 127.0.0.1:"));
    else
      CHECK((contains(out, "rank 1 at 127.0.0.1:") || contains(out, "rank 0 at 127.0.0.1:")));
  }
}

TEST_CASE("failure: a peer stopped with SIGSTOP during shared-memory allreduces is named within the stall limit") {
  Captured cap;
  auto o = launch_options(3, {"shared-memory-stall", "1"}, cap);
  o.environment = {"FLOTILLA_SHARED_MEMORY=65536", "FLOTILLA_HEARTBEAT_MS=100"};  // stall limit: 6 x 100 ms
  o.stop_on_failure = false;  // let the survivors report
  o.timeout = std::chrono::seconds(6);  // then the launcher kills the stopped rank
  o.grace = std::chrono::milliseconds(200);
  const auto result = transport::launch(o);
  REQUIRE(result.ranks.size() == 3);
  for (std::size_t r : {0u, 2u}) {
    const std::string out = cap.of(r);
    CAPTURE(r);
    CAPTURE(out);
    CHECK(result.ranks[r].exited);
    CHECK(result.ranks[r].status == 3);
    CHECK(contains(out, "tcp rank " + std::to_string(r) + " of 3"));
    // Both wait for rank 1's counter; the one that is told by the other's abort names it too.
    CHECK(contains(out, "rank 1 at 127.0.0.1:"));
    CHECK(contains(out, "has sent nothing, not even a heartbeat, for 600 ms"));
    CHECK(!contains(out, "timed out"));
    const long long ms = caught_after(out);
    // The documented bound: stall limit - interval to stall limit + interval (500 to 700 ms), and
    // some room for a loaded machine; the operations' timeout (30 s) is far above.
    CHECK(ms >= 500);
    CHECK(ms < 2000);
  }
}

namespace {
/// Runs 2 ranks that require the shared-memory path (FLOTILLA_SHARED_MEMORY=8192) except that
/// rank 1 asks for twice the capacity (`variant` "1") or turns it off ("0"): both must refuse the
/// setup with `why`, before any sum.
void check_refused_setup(const std::string& variant, const std::string& why) {
  Captured cap;
  auto o = launch_options(2, {"shared-memory-mismatch", "1", variant}, cap);
  o.environment.push_back("FLOTILLA_SHARED_MEMORY=8192");
  o.stop_on_failure = false;
  const auto result = transport::launch(o);
  REQUIRE(result.ranks.size() == 2);
  for (std::size_t r : {0u, 1u}) {
    const std::string out = cap.of(r);
    CAPTURE(r);
    CAPTURE(out);
    CHECK(result.ranks[r].exited);
    CHECK(result.ranks[r].status == 3);
    CHECK(contains(out, "tcp rank " + std::to_string(r) + " of 2: cannot set up the shared-memory allreduce"));
    CHECK(contains(out, why));
    CHECK(!contains(out, "caught after"));  // no sum ever ran
  }
}
}  // namespace

TEST_CASE("failure: ranks that disagree on the shared-memory capacity refuse the setup, naming the rank and why") {
  check_refused_setup("1", "rank 0 sums pieces of 8192 bytes and rank 1 of 16384");
}

TEST_CASE("failure: a rank with shared memory off refuses the setup of ranks that require it, naming both") {
  check_refused_setup("0", "rank 0 requires it (on) and rank 1 has it off");
}

TEST_CASE("failure: a peer stopped with SIGSTOP is detected within the stall limit, naming it") {
  Captured cap;
  auto o = launch_options(3, {"stall", "1"}, cap);
  o.stop_on_failure = false;  // let the survivors report
  o.environment = {"FLOTILLA_HEARTBEAT_MS=100"};  // stall limit: 6 x 100 ms
  o.timeout = std::chrono::seconds(4);           // then the launcher kills the stopped rank
  o.grace = std::chrono::milliseconds(200);
  const auto result = transport::launch(o);
  REQUIRE(result.ranks.size() == 3);
  for (std::size_t r : {0u, 2u}) {
    const std::string out = cap.of(r);
    CAPTURE(r);
    CAPTURE(out);
    CHECK(result.ranks[r].exited);
    CHECK(result.ranks[r].status == 3);  // caught the TransportError
    CHECK(contains(out, "tcp rank " + std::to_string(r) + " of 3"));
    CHECK(contains(out, "rank 1 at 127.0.0.1:"));
    CHECK(contains(out, "has sent nothing, not even a heartbeat, for 600 ms"));
    CHECK(contains(out, "stalled"));
    const long long ms = caught_after(out);
    // The victim stops 200 ms in; silence is counted from its last heartbeat.
    CHECK(ms >= 600);
    CHECK(ms < 2000);
  }
  CHECK(cap.of(0).find("recv from rank 1") != std::string::npos);
}

TEST_CASE("failure: a peer busy for longer than the stall limit is not stalled: its heartbeats speak for it") {
  const auto port = transport::pick_free_port();
  auto o0 = job(0, 2, port), o1 = job(1, 2, port);
  o0.heartbeat_interval = o1.heartbeat_interval = std::chrono::milliseconds(50);  // stall limit 300 ms
  std::vector<std::byte> got(8);
  RankThread r0(o0, [&](TcpEndpoint& e) { e.recv(1, 4, got); });
  RankThread r1(o1, [](TcpEndpoint& e) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // computing, not in the transport
    const std::vector<std::byte> b(8, std::byte{5});
    e.send(0, 4, b);
  });
  CHECK(r0.error() == "");
  CHECK(r1.error() == "");
  CHECK(got[7] == std::byte{5});
}

TEST_CASE("failure: across processes, the first failure is what every rank reports") {
  Captured cap;
  auto o = launch_options(4, {"fail", "2"}, cap);
  o.stop_on_failure = false;
  const auto result = transport::launch(o);
  // The others often exit before rank 2 does; the launcher names rank 2 all the same.
  CHECK(result.first_failure == std::optional<std::size_t>(2));
  CHECK(result.ranks[2].status == 1);
  CHECK(contains(cap.of(2), "rank 2 broke"));
  for (std::size_t r : {0u, 1u, 3u}) {
    const std::string out = cap.of(r);
    CAPTURE(out);
    CHECK(result.ranks[r].status == 3);
    CHECK(contains(out, "rank 2 failed: rank 2 broke"));
    CHECK(caught_after(out) < 1500);
  }
}

// ---- stress ----------------------------------------------------------------------------------------------

namespace {

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<std::byte>(x);
  }
  return v;
}

}  // namespace

TEST_CASE("stress: messages that arrive before their receive, in part or whole, arrive intact") {
  // Rank 0 first waits for rank 2, which sends late; meanwhile rank 1's large messages arrive,
  // are read aside (the wait stalls, so everything pending is read), and are then received in
  // the other order, from memory or by taking over the frame being read.
  const auto port = transport::pick_free_port();
  const auto big = pattern(24u << 20, 1), small = pattern(1000, 2), late = pattern(77, 3);
  RankThread r1(job(1, 3, port), [&](TcpEndpoint& e) {
    e.send(0, 7, big);
    e.send(0, 8, small);
    e.send(0, 7, small);
    e.barrier();
  });
  RankThread r2(job(2, 3, port), [&](TcpEndpoint& e) {
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
    e.send(0, 9, late);
    e.barrier();
  });
  RankThread r0(job(0, 3, port), [&](TcpEndpoint& e) {
    std::vector<std::byte> a(77), b(1000), c(24u << 20), d(1000);
    CHECK(e.recv_any(9, a) == 2);
    e.recv(1, 8, b);
    e.recv(1, 7, c);
    e.recv(1, 7, d);
    CHECK(a == late);
    CHECK(b == small);
    CHECK(c == big);
    CHECK(d == small);
    e.barrier();
  });
  CHECK(r0.error() == "");
  CHECK(r1.error() == "");
  CHECK(r2.error() == "");
}

TEST_CASE("stress: a receive that times out in the middle of a message leaves it to the next receive") {
  const auto port = transport::pick_free_port();
  const auto big = pattern(48u << 20, 4);
  int timeouts = 0;
  RankThread r1(job(1, 2, port), [&](TcpEndpoint& e) {
    e.send(0, 3, big);
    e.recv(0, 4, {});
  });
  RankThread r0(job(0, 2, port), [&](TcpEndpoint& e) {
    // Shorter than the message takes to arrive; set after the endpoint's own start-up exchanges
    // (the shared-memory setup), which a busy machine can delay past 1 ms.
    e.set_timeout(std::chrono::milliseconds(1));
    std::vector<std::byte> in(big.size());
    for (;;) {
      try {
        e.recv(1, 3, in);
        break;
      } catch (const TransportError& err) {
        REQUIRE(contains(err.what(), "timed out"));
        ++timeouts;
        std::fill(in.begin(), in.end(), std::byte{0});  // what was read lives elsewhere now
      }
    }
    CHECK(in == big);
    e.set_timeout(std::chrono::seconds(5));  // for the rest, and the shutdown
    e.send(1, 4, {});
  });
  CHECK(r0.error() == "");
  CHECK(r1.error() == "");
  MESSAGE("receive attempts that timed out: " << timeouts);
}

TEST_CASE("stress: two ranks that both send a large message before receiving do not deadlock") {
  // Neither socket can take 32 MiB: each send waits for the other rank to read, and each rank is
  // in its send. The stalled sends read what is pending, and both complete.
  const auto port = transport::pick_free_port();
  std::vector<std::vector<std::byte>> got(2);
  auto body = [&](TcpEndpoint& e) {
    const auto out = pattern(32u << 20, static_cast<unsigned>(e.rank()) + 10);
    std::vector<std::byte> in(out.size());
    e.send(1 - e.rank(), 1, out);
    e.recv(1 - e.rank(), 1, in);
    got[e.rank()] = std::move(in);
  };
  RankThread r0(job(0, 2, port), body), r1(job(1, 2, port), body);
  CHECK(r0.error() == "");
  CHECK(r1.error() == "");
  CHECK(got[0] == pattern(32u << 20, 11));
  CHECK(got[1] == pattern(32u << 20, 10));
}

TEST_CASE("sends: a send reads what another peer sends meanwhile, so that peer's send goes on") {
  // Rank 0 sends rank 2 two messages of 32 MiB while rank 1 sends it 1 MiB. Small socket buffers
  // hold a few hundred KiB of rank 1's message in the kernels: its send completes only once rank 0
  // reads, and rank 0 posts no receive until both its sends are over. Read while sending, rank 1's
  // message is taken in the middle of rank 0's first send, before rank 2 has the first message.
  const auto port = transport::pick_free_port();
  const auto big = pattern(32u << 20, 5), small = pattern(1u << 20, 6);
  std::atomic<bool> rank1_sent{false};
  bool sent_before_the_first_arrived = false;
  auto small_buffers = [&](std::size_t rank) {
    TcpOptions o = job(rank, 3, port);
    o.socket_buffer_bytes = 64 << 10;
    o.timeout = std::chrono::seconds(20);
    return o;
  };
  RankThread r1(small_buffers(1), [&](TcpEndpoint& e) {
    e.send(0, 2, small);
    rank1_sent = true;
    e.barrier();
  });
  RankThread r2(small_buffers(2), [&](TcpEndpoint& e) {
    std::vector<std::byte> in(big.size());
    e.recv(0, 1, in);
    sent_before_the_first_arrived = rank1_sent;
    CHECK(in == big);
    e.recv(0, 1, in);
    CHECK(in == big);
    e.barrier();
  });
  RankThread r0(small_buffers(0), [&](TcpEndpoint& e) {
    std::vector<std::byte> in(small.size());
    e.send(2, 1, big);
    e.send(2, 1, big);
    e.recv(1, 2, in);
    CHECK(in == small);
    e.barrier();
  });
  CHECK(r0.error() == "");
  CHECK(r1.error() == "");
  CHECK(r2.error() == "");
  CHECK(sent_before_the_first_arrived);
}

TEST_CASE("sends: the unsent limit is the socket's TCP_NOTSENT_LOWAT; 0 keeps the kernel's") {
  auto io = std::make_shared<boost::asio::io_context>();
  auto lowat = [](auto& s) {
    int v = -1;
    socklen_t n = sizeof v;
    REQUIRE(::getsockopt(s.native_handle(), IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, &n) == 0);
    return v;
  };
  transport::tcp::detail::TcpSocket s(*io);
  s.open(boost::asio::ip::tcp::v4());
  const int kernel = lowat(s);
  transport::tcp::detail::limit_unsent(s, 0);
  CHECK(lowat(s) == kernel);
  transport::tcp::detail::limit_unsent(s, TcpOptions{}.unsent_limit_bytes);
  CHECK(lowat(s) == 128 * 1024);
}

TEST_CASE("stress: waiting for a rank that has finished fails at once") {
  const auto port = transport::pick_free_port();
  std::string recv_error, barrier_error;
  RankThread r1(job(1, 2, port), [](TcpEndpoint&) {});
  RankThread r0(job(0, 2, port), [&](TcpEndpoint& e) {
    std::vector<std::byte> b(4);
    const auto t0 = Clock::now();
    try {
      e.recv(1, 1, b);
    } catch (const TransportError& err) {
      recv_error = err.what();
    }
    CHECK(ms_since(t0) < 2000);
  });
  CHECK(r0.error() == "");  // a mistake of the program's: the endpoint stays usable, and shuts down
  CHECK(r1.error() == "");
  CHECK(contains(recv_error, "tcp rank 0 of 2: recv from rank 1 at 127.0.0.1:"));
  CHECK(contains(recv_error, "has finished"));
}

// ---- launcher ------------------------------------------------------------------------------------------

TEST_CASE("launcher: a rank that exits non-zero stops the others, and is named") {
  Captured cap;
  const auto o = launch_options(4, {"exit", "2", "3"}, cap);
  const auto t0 = Clock::now();
  const auto result = transport::launch(o);
  CHECK(ms_since(t0) < 5000);  // the others sleep 60 s: they were stopped
  CHECK(result.first_failure == std::optional<std::size_t>(2));
  CHECK(result.exit_code() == 3);
  for (std::size_t r : {0u, 1u, 3u}) {
    CAPTURE(r);
    CHECK(result.ranks[r].stopped);
    CHECK(result.ranks[r].signal == SIGTERM);
    CHECK(contains(cap.of(r), "pid "));
    CHECK(!contains(cap.of(r), "not stopped"));
  }
  REQUIRE(!cap.messages.empty());
  CHECK(contains(cap.messages.front(), "rank 2 exited with status 3"));
  CHECK(contains(cap.messages.front(), "stopping rank(s) 0, 1, 3"));
}

TEST_CASE("launcher: a rank that stops responding is named as the job's failure and ended; the status is its") {
  Captured cap;
  auto o = launch_options(3, {"stall", "1"}, cap);
  o.environment = {"FLOTILLA_HEARTBEAT_MS=100"};  // stall limit: 6 x 100 ms
  o.timeout = std::chrono::seconds(20);          // far beyond: the job must end by itself
  const auto t0 = Clock::now();
  const auto result = transport::launch(o);
  CHECK(ms_since(t0) < 10000);
  CHECK(!result.timed_out);
  CAPTURE(cap.of(0));
  REQUIRE(result.ranks.size() == 3);
  // Not rank 0 or 2, which exit first (status 3) because of it: the stopped rank, ended by the
  // launcher once the others declared it lost.
  CHECK(result.first_failure == std::optional<std::size_t>(1));
  CHECK(result.ranks[1].signal == SIGKILL);
  CHECK(!result.ranks[1].declared_lost_by.empty());
  CHECK(result.exit_code() == 128 + SIGKILL);
  std::string messages;
  for (const auto& m : cap.messages) messages += m + "\n";
  CAPTURE(messages);
  CHECK(contains(messages, "rank 1 stopped responding: rank"));
  CHECK(contains(messages, "declared it lost while its process still ran"));
  CHECK(!contains(messages, "rank 0 exited with status"));
  CHECK(contains(cap.messages.back(), "rank 1 stopped responding"));
}

TEST_CASE("launcher: with the others going on (keep-going), a rank the job declared lost is ended; the job ends") {
  Captured cap;
  auto o = launch_options(3, {"survive-stall", "1"}, cap);
  o.environment = {"FLOTILLA_HEARTBEAT_MS=100"};
  o.stop_on_failure = false;
  o.timeout = std::chrono::seconds(20);  // without the launcher ending rank 1, the job ends here
  const auto t0 = Clock::now();
  const auto result = transport::launch(o);
  CHECK(ms_since(t0) < 10000);
  CHECK(!result.timed_out);
  REQUIRE(result.ranks.size() == 3);
  for (std::size_t r : {0u, 2u}) {
    CAPTURE(cap.of(r));
    CHECK(result.ranks[r].ok());
    CHECK(contains(cap.of(r), "went on without rank 1"));
  }
  CHECK(result.ranks[1].signal == SIGKILL);
  CHECK(result.first_failure == std::optional<std::size_t>(1));
  CHECK(result.exit_code() == 128 + SIGKILL);
  CHECK(!cap.messages.empty());
  CHECK(contains(cap.messages.back(), "rank 1 stopped responding"));
}

TEST_CASE("launcher: the flotilla-launch program") {
  auto run = [](const std::string& args, std::string& out) {
    const std::string cmd = std::string("'") + FLOTILLA_LAUNCH_PROGRAM + "' " + args + " 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    out.clear();
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    const int st = ::pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  };
  const std::string rank_program = std::string("'") + FLOTILLA_TCP_RANK_PROGRAM + "'";
  std::string out;
  const auto t0 = Clock::now();
  CHECK(run("-n 4 --grace 1 -- " + rank_program + " exit 2 3", out) == 3);
  CHECK(ms_since(t0) < 5000);
  CAPTURE(out);
  CHECK(contains(out, "flotilla-launch: rank 2 exited with status 3"));
  CHECK(contains(out, "[rank 0] pid "));

  CHECK(run("-n 2 -- " + rank_program + " print", out) == 0);
  CHECK(contains(out, "[rank 0] first line of rank 0\n"));
  CHECK(contains(out, "[rank 1] first line of rank 1\n"));
  CHECK(contains(out, "[rank 1] second line\n"));
  CHECK(contains(out, "[rank 0] an error line\n"));
  CHECK(contains(out, "[rank 1] no newline\n"));

  CHECK(run("-n 2 --timeout 0.5 --grace 0.5 -- " + rank_program + " exit 99 0", out) == 124);
  CHECK(contains(out, "did not finish within 0.5 s"));

  CHECK(run("-n 2 -- /nonexistent/program", out) == 2);
  CHECK(contains(out, "cannot start '/nonexistent/program'"));
  CHECK(run("-n zero -- true", out) == 2);
  CHECK(contains(out, "-n: 'zero' is not a number of ranks"));
  CHECK(run("-- true", out) == 2);
  CHECK(contains(out, "give -n N"));
  CHECK(run("--help", out) == 0);
  CHECK(contains(out, "usage: flotilla-launch"));
}

TEST_CASE("launcher: restarts start the whole job again after a rank is killed") {
  Captured cap;
  auto o = launch_options(3, {}, cap);
  // Rank 1 of the first attempt kills itself with SIGKILL; the others would sleep for a minute.
  o.command = {"/bin/sh", "-c",
               "echo attempt $FLOTILLA_RESTART; "
               "if [ \"$FLOTILLA_RESTART\" = 0 ]; then if [ \"$FLOTILLA_RANK\" = 1 ]; then sleep 0.2; kill -9 $$; fi; sleep 60; fi"};
  o.restarts = 2;
  const auto t0 = Clock::now();
  const auto job = transport::run_job(o);
  CHECK(ms_since(t0) < 10000);  // the survivors of the first attempt were stopped, not waited for
  CHECK(job.exit_code() == 0);
  CHECK(job.restarts == 1);
  REQUIRE(job.failures.size() == 1);
  CHECK(job.failures[0] == "rank 1 was killed by signal 9 (Killed)");
  std::string messages;
  for (const auto& m : cap.messages) messages += m + "\n";
  CAPTURE(messages);
  CHECK(contains(messages, "rank 1 was killed by signal 9 (Killed); restarting the job (restart 1 of 2)"));
  CHECK(contains(cap.of(1), "attempt 0\n"));  // (the others may be stopped before they print)
  for (std::size_t r = 0; r < 3; ++r) {
    CAPTURE(r);
    CHECK(contains(cap.of(r), "attempt 1\n"));
  }

  // A job that fails every time gives up after its restarts, with the last failure's status.
  Captured cap2;
  auto always = launch_options(2, {"exit", "0", "5"}, cap2);
  always.restarts = 1;
  const auto failed = transport::run_job(always);
  CHECK(failed.restarts == 1);
  CHECK(failed.failures.size() == 2);
  CHECK(failed.exit_code() == 5);
  REQUIRE(!cap2.messages.empty());
  CHECK(contains(cap2.messages.back(), "no restarts left (1 used)"));

  const char* bad[] = {"flotilla-launch", "-n", "2", "--restarts", "-1", "prog"};
  CHECK(contains(config_error([&] { (void)flotilla_launch::parse_args(6, bad); }),
                 "--restarts: '-1' is not a number of restarts"));
  const char* good[] = {"flotilla-launch", "-n", "2", "--restarts=3", "prog"};
  CHECK(flotilla_launch::parse_args(5, good)->restarts == 3);
}

TEST_CASE("launcher: argument parsing") {
  const char* argv[] = {"flotilla-launch", "-n", "3", "--timeout=2.5", "--env", "A=b", "--", "prog", "--flag", "x"};
  const auto o = flotilla_launch::parse_args(10, argv);
  REQUIRE(o);
  CHECK(o->ranks == 3);
  CHECK(o->timeout == std::chrono::milliseconds(2500));
  CHECK(o->environment == std::vector<std::string>{"A=b"});
  CHECK(o->command == std::vector<std::string>{"prog", "--flag", "x"});
  const char* bad[] = {"flotilla-launch", "-n", "2", "--timeout", "soon", "prog"};
  CHECK(contains(config_error([&] { (void)flotilla_launch::parse_args(6, bad); }), "--timeout: 'soon'"));
  CHECK(o->stop_on_failure);
  const char* keep[] = {"flotilla-launch", "-n", "2", "--keep-going", "prog"};
  CHECK_FALSE(flotilla_launch::parse_args(5, keep)->stop_on_failure);
  const char* both[] = {"flotilla-launch", "-n", "2", "--keep-going", "--restarts", "1", "prog"};
  CHECK(contains(config_error([&] { (void)flotilla_launch::parse_args(7, both); }),
                 "--keep-going and --restarts do not mix"));
}

// ---- authentication, integrity, fingerprints ----------------------------------------------------------

namespace {

std::string hex(std::span<const std::uint8_t> d) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s;
  for (const auto b : d) {
    s += digits[b >> 4];
    s += digits[b & 0xF];
  }
  return s;
}

std::span<const std::byte> view_bytes(std::string_view s) { return std::as_bytes(std::span<const char>(s.data(), s.size())); }

std::string hmac_hex(const std::string& key, const std::string& data) {
  // In two pieces: the parts are one message.
  const std::string_view d(data);
  return hex(transport::tcp::hmac_sha256(key, {view_bytes(d.substr(0, d.size() / 3)), view_bytes(d.substr(d.size() / 3))}));
}

}  // namespace

TEST_CASE("auth: HMAC-SHA-256 (OpenSSL's) matches RFC 4231's test vectors; proofs compare in constant time") {
  // RFC 4231 test cases 1, 2, 3, 4, 6 and 7 (6 and 7: keys longer than a block, hashed first).
  CHECK(hmac_hex(std::string(20, '\x0b'), "Hi There") ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(hmac_hex("Jefe", "what do ya want for nothing?") ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(hmac_hex(std::string(20, '\xaa'), std::string(50, '\xdd')) ==
        "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  std::string key4;
  for (int i = 1; i <= 25; ++i) key4 += static_cast<char>(i);
  CHECK(hmac_hex(key4, std::string(50, '\xcd')) == "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  CHECK(hmac_hex(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First") ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  CHECK(hmac_hex(std::string(131, '\xaa'),
                 "This is a test using a larger than block-size key and a larger than block-size data. The key needs "
                 "to be hashed before being used by the HMAC algorithm.") ==
        "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
  using transport::tcp::constant_time_equal;
  const std::array<std::byte, 3> a{std::byte{1}, std::byte{2}, std::byte{3}}, b = a,
                                 c{std::byte{1}, std::byte{2}, std::byte{4}};
  CHECK(constant_time_equal(a, b));
  CHECK(!constant_time_equal(a, c));
  CHECK(!constant_time_equal(std::span<const std::byte>(a).first(2), b));
}

TEST_CASE("auth: a frame tag is AES-256-GMAC over header and payload, the sequence number its nonce") {
  using transport::tcp::FrameMac;
  transport::tcp::Digest key{};
  for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<std::uint8_t>(7 * i + 1);
  FrameMac mac(key);
  std::vector<std::byte> header(wire::header_size, std::byte{0x11}), payload(100000);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i * 31);
  const auto tag = mac.tag(42, header, payload);
  CHECK(mac.tag(42, header, payload) == tag);  // the context is reused: nothing carries over
  CHECK(FrameMac(key).tag(42, header, payload) == tag);
  CHECK(mac.tag(43, header, payload) != tag);  // another frame number
  auto changed = payload;
  changed[77777] ^= std::byte{1};
  CHECK(mac.tag(42, header, changed) != tag);
  header[20] ^= std::byte{1};
  CHECK(mac.tag(42, header, payload) != tag);
  header[20] ^= std::byte{1};
  transport::tcp::Digest other = key;
  other[0] ^= 1;
  CHECK(FrameMac(other).tag(42, header, payload) != tag);
  // The construction wire.hpp documents, checked by OpenSSL's GCM decryption: the nonce is the
  // sequence number in 8 little-endian bytes and 4 zero bytes, the additional data the header then
  // the payload, nothing encrypted.
  auto verifies = [&](const FrameMac::Tag& t) {
    EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
    std::array<unsigned char, 12> nonce{42};
    int n = 0;
    bool ok = EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key.data(), nonce.data()) == 1;
    ok = ok && EVP_DecryptUpdate(ctx, nullptr, &n, reinterpret_cast<const unsigned char*>(header.data()),
                                 static_cast<int>(header.size())) == 1;
    ok = ok && EVP_DecryptUpdate(ctx, nullptr, &n, reinterpret_cast<const unsigned char*>(payload.data()),
                                 static_cast<int>(payload.size())) == 1;
    auto copy = t;
    ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, copy.data()) == 1;
    unsigned char none[16];
    ok = ok && EVP_DecryptFinal_ex(ctx, none, &n) == 1;
    EVP_CIPHER_CTX_free(ctx);
    return ok;
  };
  CHECK(verifies(tag));
  auto forged = tag;
  forged[3] ^= std::byte{1};
  CHECK(!verifies(forged));
  // The two ends of a connection derive the same keys, crossed; another hello gives others.
  const auto hello_c = view_bytes("client hello");
  const auto hello_s = view_bytes("server hello");
  const std::string secret = "0123456789abcdef";
  const auto kc = wire::frame_keys(secret, wire::Role::client, hello_c, hello_s);
  const auto ks = wire::frame_keys(secret, wire::Role::server, hello_c, hello_s);
  CHECK(kc.send == ks.receive);
  CHECK(kc.receive == ks.send);
  CHECK(kc.send != kc.receive);
  CHECK(wire::frame_keys(secret, wire::Role::client, view_bytes("client hellp"), hello_s).send != kc.send);
  CHECK(kc.send != wire::auth_proof(secret, wire::Role::client, hello_c, hello_s));
}

TEST_CASE("auth: the secret from a file only its owner can read; required off loopback") {
  const std::string path = "/tmp/flotilla_secret_test_" + std::to_string(::getpid());
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    REQUIRE(f);
    std::fputs("a-secret-of-some-length\n", f);
    std::fclose(f);
  }
  ::chmod(path.c_str(), 0644);
  {
    ScopedEnv env({{"FLOTILLA_SECRET_FILE", path.c_str()}});
    const std::string e = config_error([] { TcpOptions::from_environment(); });
    CHECK(contains(e, "FLOTILLA_SECRET_FILE"));
    CHECK(contains(e, "may be read by others (mode 0644)"));
    CHECK(contains(e, "chmod 600"));
  }
  ::chmod(path.c_str(), 0600);
  {
    ScopedEnv env({{"FLOTILLA_SECRET_FILE", path.c_str()}});
    CHECK(TcpOptions::from_environment().secret == "a-secret-of-some-length");  // without the newline
  }
  {
    ScopedEnv env({{"FLOTILLA_SECRET_FILE", path.c_str()}, {"FLOTILLA_SECRET", "x"}});
    CHECK(contains(config_error([] { TcpOptions::from_environment(); }), "both set"));
  }
  ::unlink(path.c_str());
  {
    ScopedEnv env({{"FLOTILLA_SECRET_FILE", path.c_str()}});
    CHECK(contains(config_error([] { TcpOptions::from_environment(); }), "cannot open"));
  }
  {
    ScopedEnv env({{"FLOTILLA_HEARTBEAT_MS", "250"}, {"FLOTILLA_CHECKSUM_DATA", "1"}});
    const auto o = TcpOptions::from_environment();
    CHECK(o.heartbeat_interval == std::chrono::milliseconds(250));
    CHECK(o.stall_limit() == std::chrono::milliseconds(1500));
    CHECK(o.checksum_data == transport::tcp::DataChecksums::all);
  }
  {
    CHECK(TcpOptions{}.checksum_data == transport::tcp::DataChecksums::other_hosts);
    ScopedEnv env({{"FLOTILLA_CHECKSUM_DATA", "0"}});
    CHECK(TcpOptions::from_environment().checksum_data == transport::tcp::DataChecksums::off);
    ::setenv("FLOTILLA_CHECKSUM_DATA", "auto", 1);
    CHECK(TcpOptions::from_environment().checksum_data == transport::tcp::DataChecksums::other_hosts);
  }
  {
    ScopedEnv env({{"FLOTILLA_CHECKSUM_DATA", "yes"}});
    CHECK(contains(config_error([] { TcpOptions::from_environment(); }),
                   "FLOTILLA_CHECKSUM_DATA: 'yes' is not auto (connections to other hosts), 0 (none) or 1 (all)"));
  }
  {
    using transport::tcp::FrameMacs;
    CHECK(TcpOptions{}.frame_mac == FrameMacs::other_hosts);
    ScopedEnv env({{"FLOTILLA_FRAME_MAC", "1"}});
    CHECK(TcpOptions::from_environment().frame_mac == FrameMacs::all);
    ::setenv("FLOTILLA_FRAME_MAC", "0", 1);
    CHECK(TcpOptions::from_environment().frame_mac == FrameMacs::off);
    ::setenv("FLOTILLA_FRAME_MAC", "auto", 1);
    CHECK(TcpOptions::from_environment().frame_mac == FrameMacs::other_hosts);
    ::setenv("FLOTILLA_FRAME_MAC", "on", 1);
    CHECK(contains(config_error([] { TcpOptions::from_environment(); }),
                   "FLOTILLA_FRAME_MAC: 'on' is not auto (connections to other hosts), 0 (none) or 1 (all)"));
  }
  // Listening beyond loopback without a secret: refused before anything listens.
  auto o = job(1, 2, 29500);
  o.bind = "0.0.0.0";
  const std::string e = config_error([&] { Tcp::run(o, 2, [](TcpEndpoint&) {}); });
  CHECK(contains(e, "listens on 0.0.0.0 (FLOTILLA_BIND)"));
  CHECK(contains(e, "FLOTILLA_SECRET"));
  auto c = job(0, 2, 29500);
  c.coordinator = "0.0.0.0:29500";
  CHECK(contains(config_error([&] { Tcp::run(c, 2, [](TcpEndpoint&) {}); }), "coordinator address 0.0.0.0:29500"));
  // A secret of one character authenticates nothing: refused, with its length and the minimum.
  {
    ScopedEnv env({{"FLOTILLA_SECRET", "x"}});
    auto s = TcpOptions::from_environment();
    s.world_size = 2;
    s.coordinator = "127.0.0.1:29500";
    const std::string short_secret = config_error([&] { Tcp::run(s, 2, [](TcpEndpoint&) {}); });
    CHECK(contains(short_secret, "is 1 bytes; it must be at least 16"));
    CHECK(contains(short_secret, "FLOTILLA_SECRET"));
  }
}

namespace {

/// A client that speaks the handshake by hand: `hello_auth` is what its hello claims, `secret` the
/// secret its proof uses (none sent when empty). Returns whether the server let it through (it
/// then gets the table of ranks).
bool fake_handshake(std::uint16_t port, std::uint8_t hello_auth, const std::string& secret) {
  FakePeer peer(port);
  wire::Hello m;
  m.world_size = 2;
  m.rank = 1;
  m.listen_port = 1;
  m.listen_host = "127.0.0.1";
  m.auth = hello_auth;
  m.nonce[0] = 42;
  const auto mine = wire::encode_hello(m);
  wire::Header h;
  h.type = wire::FrameType::hello;
  peer.frame(h, mine);
  const auto reply = peer.read();
  if (!reply || reply->first.type != wire::FrameType::hello) return false;
  const auto proof = peer.read();
  if (!proof || proof->first.type != wire::FrameType::auth) return false;
  if (secret.empty()) return false;  // closes without a proof
  {
    const auto theirs = bytes_of(reply->second);
    const auto d = wire::auth_proof(secret, wire::Role::client, mine, theirs);
    wire::Header a;
    a.type = wire::FrameType::auth;
    a.sequence = 1;
    peer.frame(a, std::span<const std::byte>(reinterpret_cast<const std::byte*>(d.data()), d.size()));
  }
  const auto next = peer.read();
  return next && next->first.type == wire::FrameType::table;
}

long rss_kib() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
  std::fclose(f);
  return kib;
}

/// One hostile connection of kind `k % 7` to `port`.
void attack_once(std::uint16_t port, std::size_t k, std::mt19937& rng) {
  FakePeer peer(port);
  switch (k % 7) {
    case 0: {  // random bytes (at least a header's worth: fewer would wait for the rest)
      std::vector<std::byte> junk(wire::header_size + rng() % 300);
      for (auto& b : junk) b = static_cast<std::byte>(rng());
      peer.write(junk);
      break;
    }
    case 1: {  // a truncated frame: half a header, then the connection ends
      wire::Header h;
      h.type = wire::FrameType::hello;
      const auto b = wire::encode(h);
      peer.write(std::span<const std::byte>(b).first(20));
      return;
    }
    case 2: {  // a length far beyond any control frame
      wire::Header h;
      h.type = wire::FrameType::hello;
      h.payload_length = 1ull << 62;
      peer.write(wire::encode(h));
      break;
    }
    case 3: {  // another protocol version
      peer.hello(2, 1, wire::protocol_version + 7);
      break;
    }
    case 4: {  // a truncated hello payload
      wire::Header h;
      h.type = wire::FrameType::hello;
      h.payload_length = 100;
      peer.write(wire::encode(h));
      peer.write(std::vector<std::byte>(10));
      return;
    }
    case 5: {  // no secret
      peer.hello(2, 1);
      break;
    }
    default:  // connects, and hangs up without a word
      return;
  }
  peer.closed();
}

}  // namespace

TEST_CASE("hostile: with a secret, strangers (no secret, a wrong one, garbage) are dropped and logged; the job completes") {
  Log log;
  const std::string secret = "correct horse battery staple";
  survive(
      [&](std::uint16_t port) {
        CHECK(!fake_handshake(port, 0, ""));            // no secret
        CHECK(!fake_handshake(port, 1, "wrong"));       // a wrong secret
        CHECK(!fake_handshake(port, 1, ""));            // claims one, proves nothing (closes)
        std::mt19937 rng(1);
        for (std::size_t k = 0; k < 7; ++k) attack_once(port, k, rng);
      },
      log, secret);
  CAPTURE(log.text());
  CHECK(log.count() == 10);
  CHECK(log.has("authentication required"));
  CHECK(log.has("authentication failed"));
  CHECK(log.has("bad magic number"));
  CHECK(log.has("protocol version mismatch"));
  CHECK(log.has("closed the connection"));

  // A rank with the wrong secret is refused, and says why.
  const auto port = transport::pick_free_port();
  auto o0 = job(0, 2, port), o1 = job(1, 2, port);
  o0.secret = secret;
  o1.secret = "another secret, not the job's";
  o0.connect_timeout = std::chrono::milliseconds(1500);
  o0.log = [](const std::string&) {};
  RankThread r0(o0, [](TcpEndpoint&) {});
  RankThread r1(o1, [](TcpEndpoint&) {});
  const std::string e1 = r1.error();
  CAPTURE(e1);
  CHECK(contains(e1, "authentication failed"));
  CHECK(contains(r0.error(), "did not register"));
}

namespace {
/// A local process that says hello to the coordinator as rank 1 of 2 and proves nothing: whether
/// it was let in (it got the table of ranks).
bool stranger_admitted(std::uint16_t port) {
  FakePeer peer(port);
  peer.hello(2, 1);
  for (int frames = 0; frames < 3; ++frames) {
    const auto f = peer.read();
    if (!f) return false;
    if (f->first.type == wire::FrameType::table) return true;
  }
  return false;
}
}  // namespace

TEST_CASE("hostile: a job started by the launcher has a secret of its own; a stranger claiming a rank is refused") {
  // Rank 1 starts late; meanwhile another process of the same user, not started by the launcher,
  // says hello to the coordinator as rank 1, without a secret, as any local user could.
  Captured cap;
  auto o = launch_options(2, {"late", "1", "1500"}, cap);
  o.port = transport::pick_free_port();
  std::optional<bool> admitted;
  std::thread stranger([&] { admitted = stranger_admitted(o.port); });
  const auto result = transport::launch(o);
  stranger.join();
  CAPTURE(cap.of(0));
  CAPTURE(cap.of(1));
  REQUIRE(admitted.has_value());
  CHECK(!*admitted);
  CHECK(result.ok());
  CHECK(contains(cap.of(0), "authentication required"));
  CHECK(contains(cap.of(1), "rank 1 joined late"));

  // A secret the user gave is the job's; the launcher's is the fallback.
  Captured cap2;
  auto mine = launch_options(1, {"print-secret"}, cap2);
  mine.environment = {"FLOTILLA_SECRET=a secret of the user's own"};
  CHECK(transport::launch(mine).ok());
  CHECK(contains(cap2.of(0), "secret: a secret of the user's own\n"));
  Captured cap3;
  auto fresh = launch_options(1, {"print-secret"}, cap3);
  CHECK(transport::launch(fresh).ok());
  CAPTURE(cap3.of(0));
  CHECK(contains(cap3.of(0), "secret: "));
  CHECK(cap3.of(0).size() >= std::string("secret: \n").size() + 64);  // 32 random bytes in hex
}

// g++ says so with __SANITIZE_ADDRESS__, clang++ (before 16) only through __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define FLOTILLA_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FLOTILLA_TEST_UNDER_ASAN 1
#endif
#endif
#ifndef FLOTILLA_TEST_UNDER_ASAN
#define FLOTILLA_TEST_UNDER_ASAN 0
#endif

TEST_CASE("hostile: 1000 bad connections to a live coordinator: each dropped, the job completes, memory stays flat") {
  Log log;
  long before = 0, after = 0;
  survive(
      [&](std::uint16_t port) {
        std::mt19937 rng(7);
        for (std::size_t k = 0; k < 140; ++k) attack_once(port, k, rng);  // warm up the allocator
        before = rss_kib();
        for (std::size_t k = 0; k < 1000; ++k) attack_once(port, k, rng);
        after = rss_kib();
      },
      log, "a secret of the job's own");
  MESSAGE("RSS before " << before << " KiB, after 1000 bad connections " << after << " KiB");
  CHECK(log.count() == 1140);  // every one of them logged
  CHECK(before > 0);
#if FLOTILLA_TEST_UNDER_ASAN
  // AddressSanitizer keeps freed blocks in quarantine (256 MiB by default) to catch use after
  // free, so RSS grows with any freeing; its leak check at exit covers this case instead.
  MESSAGE("RSS growth not checked under AddressSanitizer");
#else
  CHECK(after - before < 2048);
#endif
}

namespace {

/// Connections to `port` that say nothing, and others that send one byte of a hello a second,
/// held open (the tricklers writing) until the object goes.
class IdleClients {
 public:
  IdleClients(std::uint16_t port, std::size_t silent, std::size_t trickling) {
    for (std::size_t k = 0; k < silent; ++k) silent_.push_back(std::make_unique<FakePeer>(port));
    for (std::size_t k = 0; k < trickling; ++k) trickling_.push_back(std::make_unique<FakePeer>(port));
    if (trickling > 0)
      writer_ = std::thread([this] {
        wire::Header h;
        h.type = wire::FrameType::hello;
        h.payload_length = 300;
        const auto bytes = wire::encode(h);
        for (std::size_t i = 0; i < bytes.size() && !stop_; ++i) {
          for (auto& p : trickling_) p->write(std::span<const std::byte>(&bytes[i], 1));
          for (int t = 0; t < 10 && !stop_; ++t) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      });
  }
  ~IdleClients() {
    stop_ = true;
    if (writer_.joinable()) writer_.join();
  }

 private:
  std::vector<std::unique_ptr<FakePeer>> silent_, trickling_;
  std::atomic<bool> stop_{false};
  std::thread writer_;
};

}  // namespace

TEST_CASE("hostile: silent connections to the coordinator do not keep the job from forming") {
  // 50 connections that never speak and 3 that trickle a byte a second reach rank 0 before the
  // ranks do. Each may take up to 5 s to finish a handshake; the ranks must not wait behind them.
  const auto port = transport::pick_free_port();
  auto o0 = job(0, 3, port), o1 = job(1, 3, port), o2 = job(2, 3, port);
  Log log;
  o0.log = log.sink();
  for (auto* o : {&o0, &o1, &o2}) o->connect_timeout = std::chrono::seconds(20);
  auto body = [](TcpEndpoint& e) {
    std::vector<float> v(1000, static_cast<float>(e.rank() + 1));
    collective::ring_allreduce(e, std::span<float>(v));
    if (v[0] != 6.0f || v[999] != 6.0f) throw std::runtime_error("wrong sum");
  };
  RankThread r0(o0, body);
  IdleClients idle(port, 50, 3);
  const auto t0 = Clock::now();
  RankThread r1(o1, body);
  RankThread r2(o2, body);
  const std::string e0 = r0.error(), e1 = r1.error(), e2 = r2.error();
  const auto took = ms_since(t0);
  CAPTURE(e0);
  CAPTURE(e1);
  CAPTURE(e2);
  CAPTURE(log.text());
  CHECK(e0 == "");
  CHECK(e1 == "");
  CHECK(e2 == "");
  MESSAGE("the job formed and summed in " << took << " ms beside 53 idle connections");
  CHECK(took < 5000);  // one idle connection served at a time would take 5 s each
}

TEST_CASE("hostile: beyond 64 idle connections at once the oldest are dropped, and the job still forms") {
  const auto port = transport::pick_free_port();
  auto o0 = job(0, 2, port), o1 = job(1, 2, port);
  Log log;
  o0.log = log.sink();
  o0.connect_timeout = o1.connect_timeout = std::chrono::seconds(20);
  RankThread r0(o0, [](TcpEndpoint& e) { e.barrier(); });
  IdleClients idle(port, 100, 0);
  const auto t0 = Clock::now();
  RankThread r1(o1, [](TcpEndpoint& e) { e.barrier(); });
  const std::string e0 = r0.error(), e1 = r1.error();
  const auto took = ms_since(t0);
  CAPTURE(e0);
  CAPTURE(e1);
  CAPTURE(log.text());
  CHECK(e0 == "");
  CHECK(e1 == "");
  CHECK(took < 5000);
  CHECK(log.count() >= 36);  // 100 accepted, at most 64 kept
  CHECK(log.has("the oldest of 64 connections in the middle of their handshake (at most 64 at once)"));
}

TEST_CASE("hostile: a rendezvous that times out beside idle connections names the missing rank, counts the rest") {
  const auto port = transport::pick_free_port();
  auto o0 = job(0, 3, port), o1 = job(1, 3, port);
  Log log;
  o0.log = log.sink();
  o0.connect_timeout = std::chrono::milliseconds(2000);
  o1.connect_timeout = std::chrono::milliseconds(2000);
  RankThread r0(o0, [](TcpEndpoint&) {});
  IdleClients idle(port, 10, 0);
  {
    FakePeer garbage(port);
    garbage.write(bytes_of("GET / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curious\r\n\r\n"));
    CHECK(garbage.closed());
  }
  {
    FakePeer boastful(port);  // a hello far larger than any hello is
    wire::Header h;
    h.type = wire::FrameType::hello;
    h.payload_length = 5000;
    boastful.write(wire::encode(h));
    CHECK(boastful.closed());
  }
  RankThread r1(o1, [](TcpEndpoint&) {});  // rank 2 never comes
  const std::string e0 = r0.error();
  CAPTURE(e0);
  CAPTURE(log.text());
  CHECK(contains(e0, "timed out after 2000 ms"));
  CHECK(contains(e0, "rank(s) 2 did not register"));  // rank 1 did: it is not blamed
  CHECK(contains(e0, "2 other connections were dropped"));
  CHECK(contains(e0, "10 were still open without a complete handshake"));
  CHECK(log.has("bad magic number"));
  CHECK(log.has("a hello frame of 5000 bytes (at most 4096)"));
}

TEST_CASE("hostile: silent connections to a rank's rejoin port do not hold up its operations") {
  // Rank 1 accepts rejoining ranks (as a parameter server does) while it receives a message every
  // 100 ms from rank 0; eight connections to its rejoin port say nothing. Its receives must go on
  // as before, and each connection is dropped when its handshake limit (5 s) passes.
  const auto port = transport::pick_free_port();
  auto o0 = job(0, 2, port), o1 = job(1, 2, port);
  o1.connect_timeout = std::chrono::seconds(30);  // the rendezvous' limit, not a handshake's
  Log log;
  o1.log = log.sink();
  constexpr int messages = 75;  // 7.5 s: past the 5 s after which each silent one is dropped
  std::promise<std::string> rejoin_address;
  long long longest_wait = 0;
  RankThread r1(o1, [&](TcpEndpoint& e) {
    e.accept_rejoins(true);
    rejoin_address.set_value(e.rejoin_address());
    std::int32_t m = 0;
    e.recv(0, 1, std::as_writable_bytes(std::span<std::int32_t>(&m, 1)));  // the first, before the silent ones
    for (int k = 1; k < messages; ++k) {
      const auto t = Clock::now();
      e.recv(0, 1, std::as_writable_bytes(std::span<std::int32_t>(&m, 1)));
      longest_wait = std::max(longest_wait, ms_since(t));
      if (m != k) throw std::runtime_error("message " + std::to_string(m) + " where " + std::to_string(k) + " was due");
    }
  });
  RankThread r0(o0, [&](TcpEndpoint& e) {
    for (std::int32_t k = 0; k < messages; ++k) {
      e.send(1, 1, std::as_bytes(std::span<const std::int32_t>(&k, 1)));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const auto at = transport::tcp::detail::parse_host_port(rejoin_address.get_future().get());
  REQUIRE(at);
  IdleClients idle(at->port, 8, 0);
  const std::string e0 = r0.error(), e1 = r1.error();
  CAPTURE(e0);
  CAPTURE(e1);
  CAPTURE(log.text());
  CHECK(e0 == "");
  CHECK(e1 == "");
  MESSAGE("the longest receive beside 8 silent connections to the rejoin port took " << longest_wait << " ms");
  CHECK(longest_wait < 1000);
  CHECK(log.count() == 8);  // each dropped, after 5 s, and said so with the limit that applied
  CHECK(log.has("5000 ms"));
  CHECK(!log.has("30000 ms"));
}

TEST_CASE("hostile: a malformed shared-memory setting fails the rendezvous, naming the peer") {
  for (const std::string offer : {"sideways 1048576 h", "on 12 h", "auto", "on 1048576", "on 1048576 h extra"}) {
    CAPTURE(offer);
    const auto port = transport::pick_free_port();
    RankThread r0(job(0, 2, port), [](TcpEndpoint&) {});
    RegisteredFake fake(port, offer);
    CHECK(fake.plan == "fail rank 1 sent a malformed setting '" + offer + "'");
    const std::string e0 = r0.error();
    CAPTURE(e0);
    CHECK(contains(e0, "tcp rank 0 of 2: cannot set up the shared-memory allreduce"));
    CHECK(contains(e0, "rank 1 sent a malformed setting '" + offer + "'"));
  }
}

TEST_CASE("hostile: a payload that does not match its CRC fails the receive, naming the peer") {
  const auto port = transport::pick_free_port();
  std::string e0;
  RankThread r0(job(0, 2, port), [&](TcpEndpoint& e) {
    std::vector<std::byte> b(64);
    e.recv(1, 5, b);
  });
  {
    RegisteredFake fake(port);
    std::vector<std::byte> payload(64, std::byte{9});
    wire::Header h;
    h.type = wire::FrameType::data;
    h.tag = 5;
    h.sequence = RegisteredFake::first_sequence;
    wire::seal_payload(h, payload);
    payload[17] ^= std::byte{4};  // corrupted on the way
    fake.peer.frame(h, payload);
    CHECK(fake.peer.closed());
  }
  e0 = r0.error();
  CAPTURE(e0);
  CHECK(contains(e0, "recv from rank 1 at 127.0.0.1:1 (tag 5) failed"));
  CHECK(contains(e0, "bad payload CRC"));
}

namespace {

/// A man in the middle on loopback: accepts one connection on its own port, connects it to
/// `upstream`, and copies the bytes both ways, XOR-ing `flip` into the byte at offset `at` of the
/// stream from the accepted side (the client) to upstream (none when `flip` is 0).
class FlippingProxy {
 public:
  FlippingProxy(std::uint16_t upstream, std::uint64_t at, std::byte flip)
      : listener_(::socket(AF_INET, SOCK_STREAM, 0)), upstream_(upstream), at_(at), flip_(flip) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(listener_, 4) == 0);
    socklen_t n = sizeof a;
    REQUIRE(::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &n) == 0);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  FlippingProxy(const FlippingProxy&) = delete;
  FlippingProxy& operator=(const FlippingProxy&) = delete;
  ~FlippingProxy() {
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
  }
  std::uint16_t port() const { return port_; }
  /// Bytes copied from the client to upstream so far.
  std::uint64_t forwarded() const { return forwarded_; }

 private:
  void run() {
    const int client = ::accept(listener_, nullptr, nullptr);
    if (client < 0) return;
    const int server = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(upstream_);
    if (::connect(server, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      std::vector<std::byte> buffer(1 << 16);
      for (;;) {
        pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
        if (::poll(fds, 2, 10000) <= 0) break;
        const bool up = (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
        const int from = up ? client : server, to = up ? server : client;
        const ssize_t r = ::read(from, buffer.data(), buffer.size());
        if (r <= 0) break;
        if (up && flip_ != std::byte{0} && at_ >= forwarded_ && at_ < forwarded_ + static_cast<std::uint64_t>(r))
          buffer[at_ - forwarded_] ^= flip_;
        if (up) forwarded_ += static_cast<std::uint64_t>(r);
        for (ssize_t done = 0; done < r;) {
          const ssize_t w = ::send(to, buffer.data() + done, static_cast<std::size_t>(r - done), MSG_NOSIGNAL);
          if (w <= 0) break;
          done += w;
        }
      }
    }
    ::close(server);
    ::close(client);
  }

  int listener_;
  std::uint16_t upstream_, port_ = 0;
  std::uint64_t at_;
  std::byte flip_;
  std::atomic<std::uint64_t> forwarded_{0};
  std::thread thread_;
};

}  // namespace

TEST_CASE("hostile: a byte changed on the way after the handshake is caught by the frame tag, or the CRC") {
  // Rank 1 reaches rank 0 through the proxy, which changes one byte in the middle of the 1 MiB
  // message that rank 1 sends after the handshake (the handshake and setup take a few hundred
  // bytes). With frame tags the change is caught whatever it is, since only the ends know the
  // key; with CRCs alone, an accident is caught; with neither, the message arrives changed.
  struct Case {
    transport::tcp::FrameMacs mac;
    transport::tcp::DataChecksums crc;
    const char* expected;  // in rank 0's error; nullptr: no error, the message arrives changed
  };
  using transport::tcp::DataChecksums;
  using transport::tcp::FrameMacs;
  for (const Case c : {Case{FrameMacs::all, DataChecksums::off, "whose frame tag does not match its bytes"},
                       Case{FrameMacs::all, DataChecksums::all, "whose frame tag does not match its bytes"},
                       Case{FrameMacs::off, DataChecksums::all, "bad payload CRC"},
                       Case{FrameMacs::off, DataChecksums::off, nullptr}}) {
    CAPTURE(static_cast<int>(c.mac));
    CAPTURE(static_cast<int>(c.crc));
    const auto port = transport::pick_free_port();
    FlippingProxy proxy(port, 500'000, std::byte{0x20});
    auto o0 = job(0, 2, port), o1 = job(1, 2, proxy.port());
    for (auto* o : {&o0, &o1}) {
      o->secret = "a secret of twenty-four!";
      o->frame_mac = c.mac;
      o->checksum_data = c.crc;
      o->shared_memory = transport::tcp::SharedMemory::off;
    }
    std::vector<std::byte> sent(1 << 20);
    for (std::size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<std::byte>(i % 251);
    std::vector<std::byte> got(sent.size());
    std::string caught;
    RankThread r0(o0, [&](TcpEndpoint& e) {
      try {
        e.recv(1, 5, got);
      } catch (const TransportError& err) {
        caught = err.what();
        throw;
      }
    });
    RankThread r1(o1, [&](TcpEndpoint& e) { e.send(0, 5, sent); });
    const std::string e0 = r0.error(), e1 = r1.error();
    CAPTURE(e0);
    CAPTURE(e1);
    CHECK(proxy.forwarded() > 500'000);  // the change did happen
    if (c.expected) {
      CHECK(contains(caught, "recv from rank 1 at 127.0.0.1:"));
      CHECK(contains(caught, "sent a bad frame"));
      CHECK(contains(caught, c.expected));
      CHECK(!e1.empty());  // rank 1 learns of it too (the abort, or the closed connection)
    } else {
      CHECK(e0.empty());
      CHECK(got != sent);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < got.size(); ++i) differ += got[i] != sent[i];
      CHECK(differ == 1);
    }
  }
}

TEST_CASE("hostile: on a connection that must carry frame tags, a frame without one drops it") {
  // Both ranks know the secret; rank 1 sends no tags, rank 0 requires them on every connection.
  const auto port = transport::pick_free_port();
  auto o0 = job(0, 2, port), o1 = job(1, 2, port);
  o0.secret = o1.secret = "a secret of twenty-four!";
  o0.frame_mac = transport::tcp::FrameMacs::all;
  o1.frame_mac = transport::tcp::FrameMacs::off;
  RankThread r0(o0, [](TcpEndpoint& e) { e.barrier(); });
  RankThread r1(o1, [](TcpEndpoint& e) { e.barrier(); });
  const std::string e0 = r0.error();
  CAPTURE(e0);
  CHECK(contains(e0, "sent a bad frame"));
  CHECK(contains(e0, "without a frame tag, on a connection whose frames must carry one (TcpOptions::frame_mac"));
  CHECK(!r1.error().empty());
}

TEST_CASE("wire: with frame tags on, a job's messages arrive intact and each frame costs 16 bytes more") {
  auto run = [](transport::tcp::FrameMacs mac) {
    const auto port = transport::pick_free_port();
    auto o0 = job(0, 2, port), o1 = job(1, 2, port);
    for (auto* o : {&o0, &o1}) {
      o->secret = "a secret of twenty-four!";
      o->frame_mac = mac;
      o->shared_memory = transport::tcp::SharedMemory::off;
    }
    std::array<TrafficCounters, 2> before{}, after{};
    auto body = [&](TcpEndpoint& e) {
      std::vector<std::byte> out(300000), in(300000);
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>((i * 7 + e.rank()) % 256);
      before[e.rank()] = e.counters();
      for (int round = 0; round < 10; ++round) e.sendrecv(1 - e.rank(), 1, out, 1 - e.rank(), in);
      e.barrier();
      after[e.rank()] = e.counters();
      for (std::size_t i = 0; i < in.size(); ++i)
        if (in[i] != static_cast<std::byte>((i * 7 + (1 - e.rank())) % 256)) throw std::runtime_error("corrupted");
    };
    RankThread r0(o0, body), r1(o1, body);
    CHECK(r0.error() == "");
    CHECK(r1.error() == "");
    return std::array<TrafficCounters, 2>{after[0] - before[0], after[1] - before[1]};
  };
  const auto tagged = run(transport::tcp::FrameMacs::all), plain = run(transport::tcp::FrameMacs::off);
  for (std::size_t r = 0; r < 2; ++r) {
    CAPTURE(r);
    CHECK(tagged[r].payload_bytes_sent == plain[r].payload_bytes_sent);
    // 10 data frames and one barrier frame each way: 11 tags of 16 bytes.
    CHECK(tagged[r].header_bytes_sent == plain[r].header_bytes_sent + 11 * 16);
    CHECK(tagged[r].header_bytes_received == plain[r].header_bytes_received + 11 * 16);
  }
}

TEST_CASE("wire: checked data frames and operation fingerprints; ranks in different collectives fail at once") {
  {  // with CRCs on data frames, a job's messages arrive intact
    const auto port = transport::pick_free_port();
    auto o0 = job(0, 2, port), o1 = job(1, 2, port);
    o0.checksum_data = o1.checksum_data = transport::tcp::DataChecksums::all;
    auto body = [](TcpEndpoint& e) {
      std::vector<std::byte> out(100000, std::byte{3}), in(100000);
      e.sendrecv(1 - e.rank(), 1, out, 1 - e.rank(), in);
      if (in != out) throw std::runtime_error("corrupted");
    };
    RankThread r0(o0, body), r1(o1, body);
    CHECK(r0.error() == "");
    CHECK(r1.error() == "");
  }
  const transport::Operation op{transport::OpKind::broadcast, 7, 1000};
  CHECK(transport::Operation::from_fingerprint(op.fingerprint()) == op);
  CHECK(op.describe() == "broadcast #7 of 1000 elements");
  CHECK(transport::Operation{}.fingerprint() == 0);
  // Rank 0 broadcasts while rank 1 allreduces, on one tag and with messages of one size.
  const auto port = transport::pick_free_port();
  const auto t0 = Clock::now();
  RankThread r0(job(0, 2, port), [](TcpEndpoint& e) {
    std::vector<float> v(1000, 1.0f);
    collective::BroadcastOptions o;
    o.tag = 77;
    collective::broadcast(e, std::span<float>(v), 1, o);
  });
  RankThread r1(job(1, 2, port), [](TcpEndpoint& e) {
    std::vector<float> v(1000, 1.0f);
    collective::RingOptions o;
    o.tag = 77;
    o.algorithm = collective::AllreduceAlgorithm::ring;
    collective::ring_allreduce(e, std::span<float>(v), o);
  });
  const std::string e0 = r0.error(), e1 = r1.error();
  CAPTURE(e0);
  CAPTURE(e1);
  CHECK(ms_since(t0) < 3000);
  const std::string both = e0 + "\n" + e1;
  CHECK(contains(both, "ring_allreduce #1 of 1000 elements"));
  CHECK(contains(both, "broadcast #1 of 1000 elements"));
  CHECK(contains(both, "disagree on which collective"));
  CHECK(contains(both, "rank 1 at 127.0.0.1:"));
}
