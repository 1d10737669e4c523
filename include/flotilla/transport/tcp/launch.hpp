// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_TCP_LAUNCH_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_TCP_LAUNCH_HPP_INCLUDED
// The local launcher of TCP jobs, as a library: what the flotilla-launch program does.
//
//   flotilla-launch -n 4 [--timeout S] -- ./train --epochs 3
//
// launch() picks a free loopback port for the coordinator, starts N copies of the command with
// FLOTILLA_RANK, FLOTILLA_LOCAL_RANK, FLOTILLA_WORLD_SIZE and FLOTILLA_COORDINATOR set, and prefixes every line they
// print with "[rank k] " (stdout to stdout, stderr to stderr). When a rank exits with a non-zero
// status or is killed, the others are stopped (SIGTERM, then SIGKILL after a grace period) and
// the result names that rank and how it ended; a timeout bounds the whole job. A rank that the
// others declare lost while its process still runs (stopped, hung: launch_reports.hpp) is named
// and ended with SIGKILL, also when the others go on without it. The ranks share a fresh random
// secret (FLOTILLA_LAUNCH_SECRET, used unless they were given one), so that only they can join.
//
// With restarts (run_job(), flotilla-launch --restarts N), a job that fails that way is started
// again, whole, up to N times: TensorFlow's checkpoint-and-restart. Each attempt's ranks get
// FLOTILLA_RESTART (0 for the first), and a program that resumes from its checkpoints
// (FitOptions::checkpoints.resume) goes on from the newest complete set.
//
// POSIX only (posix_spawn, poll, process groups): processes and pipes are not sockets, and stay
// out of Boost.Asio; only the coordinator's free port is found through the socket layer
// (socket.hpp). Each rank runs in a process group of its own, so that stopping it stops what
// it started too. A library installs no signal handlers: the program does, and passes the flag they
// set as LaunchOptions::interrupted, and launch() then stops the whole job
// (tools/flotilla_launch.cpp forwards SIGINT/SIGTERM/SIGHUP that way).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/transport/tcp/launch_reports.hpp"
#include "flotilla/transport/tcp/socket.hpp"

extern char** environ;

namespace flotilla::transport::tcp {

struct LaunchOptions {
  /// How many ranks (processes) to start.
  std::size_t ranks = 1;
  /// The program and its arguments; the program is looked up in PATH like a shell does.
  std::vector<std::string> command;
  /// The longest the whole job may run; 0: no limit. When it passes, every rank is stopped.
  std::chrono::milliseconds timeout{0};
  /// How long a rank has between SIGTERM and SIGKILL when the job is stopped.
  std::chrono::milliseconds grace{2000};
  /// The coordinator's address (rank 0 listens there). Loopback: the job is local.
  std::string host = "127.0.0.1";
  /// The coordinator's port; 0 picks a free one.
  std::uint16_t port = 0;
  /// Whether the failure of one rank stops the others (the default), or they are left to finish.
  bool stop_on_failure = true;
  /// run_job(): how many times a job whose rank failed is started again, whole (0: never). A job
  /// stopped by its timeout or by an interrupt is not restarted.
  std::size_t restarts = 0;
  /// Extra environment variables for every rank, "NAME=value".
  std::vector<std::string> environment;
  /// The ranks get a fresh random secret of this job's own (32 bytes from the kernel, hex, in
  /// FLOTILLA_LAUNCH_SECRET), which the transport uses when no secret was given
  /// (FLOTILLA_SECRET, FLOTILLA_SECRET_FILE, --secret-file): so that only processes this launcher
  /// started can join the job. (A process's environment can be read by its owner only.) Off: a job
  /// without a secret of the user's runs unauthenticated, which the transport allows on loopback
  /// alone.
  bool job_secret = true;
  /// Each line a rank prints, without its newline; `stream` is 1 (stdout) or 2 (stderr). Default:
  /// "[rank k] line" to the same stream of this process.
  std::function<void(std::size_t rank, int stream, std::string_view line)> on_output;
  /// The launcher's own messages (a rank failed, ranks being stopped). Default: to stderr, with
  /// "flotilla-launch: " before.
  std::function<void(const std::string& message)> on_message;
  /// When given, the job is stopped once *interrupted becomes non-zero (set it from a signal
  /// handler).
  const volatile std::sig_atomic_t* interrupted = nullptr;
};

/// How one rank ended.
struct RankExit {
  bool exited = false;  // it exited (with `status`); else it was killed by `signal`
  int status = 0;
  int signal = 0;
  bool stopped = false;  // the launcher had told it to stop (another rank failed, timeout, interrupt)
  /// The ranks that declared it lost while its process still ran (it had stopped responding: no
  /// heartbeat within their stall limit); the launcher then ended it with SIGKILL. Empty otherwise.
  std::vector<std::size_t> declared_lost_by;

  bool ok() const noexcept { return exited && status == 0; }
  /// "rank 2 stopped responding: rank 0 declared it lost while its process still ran (stopped,
  /// hung, or unreachable)"; empty when no rank declared it lost.
  std::string stopped_responding(std::size_t rank) const {
    if (declared_lost_by.empty()) return {};
    std::string by;
    for (const std::size_t k : declared_lost_by) by += (by.empty() ? "" : ", ") + std::to_string(k);
    return "rank " + std::to_string(rank) + " stopped responding: rank" + (declared_lost_by.size() > 1 ? "s " : " ") + by +
           " declared it lost while its process still ran (stopped, hung, or unreachable)";
  }
  /// "rank 2 exited with status 3", "rank 1 was killed by signal 9 (Killed)", or, for a rank the
  /// launcher ended because the job had declared it lost, stopped_responding() and how it ended.
  std::string describe(std::size_t rank) const {
    if (!declared_lost_by.empty())
      return stopped_responding(rank) + "; the launcher ended it" +
             (exited ? " (it exited with status " + std::to_string(status) + ")" : " (signal " + std::to_string(signal) + ")");
    std::string s = "rank " + std::to_string(rank);
    if (exited) return s + " exited with status " + std::to_string(status);
    const char* name = ::strsignal(signal);
    return s + " was killed by signal " + std::to_string(signal) + (name ? " (" + std::string(name) + ")" : "");
  }
};

struct LaunchResult {
  std::vector<RankExit> ranks;
  /// The rank whose failure ended the job, when one did (the first that failed on its own).
  std::optional<std::size_t> first_failure;
  bool timed_out = false;
  bool interrupted = false;
  /// host:port the coordinator was given.
  std::string coordinator;

  bool ok() const noexcept { return !first_failure && !timed_out && !interrupted; }
  /// What a launcher program should exit with: 0; the failed rank's status (128 + signal when it
  /// was killed, as shells do); 124 on timeout (as timeout(1)); 130 when interrupted.
  int exit_code() const noexcept {
    if (first_failure) {
      const RankExit& r = ranks[*first_failure];
      return r.exited ? (r.status != 0 ? r.status : 1) : 128 + r.signal;
    }
    if (timed_out) return 124;
    if (interrupted) return 130;
    return 0;
  }
};

namespace detail {

/// Milliseconds from now to `deadline` for poll(): at least 0, rounded up so that a wait never
/// ends a hair early and spins, at most a day.
inline int poll_ms(std::chrono::steady_clock::time_point deadline) {
  const auto left = deadline - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<long long>(ms, 86'400'000));
}

inline void write_fd(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n > 0) {
      text.remove_prefix(static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 100);
    } else {
      return;  // a closed stdout is not the job's failure
    }
  }
}

/// Opens a pidfd for `pid` where the kernel has them (Linux 5.3+): it becomes readable when the
/// process exits, so the launcher notices an exit at once, in the order they happen (which is how
/// it tells the rank that failed first from those that failed because of it). -1 elsewhere.
inline int open_pidfd(pid_t pid) {
#if defined(__linux__) && defined(SYS_pidfd_open)
  const long fd = ::syscall(SYS_pidfd_open, pid, 0);
  if (fd >= 0) {
    ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
    return static_cast<int>(fd);
  }
#else
  (void)pid;
#endif
  return -1;
}

struct LaunchedRank {
  pid_t pid = -1;
  Fd pidfd;
  Fd out[2];                 // read ends: stdout, stderr
  std::string partial[2];    // a line not yet ended
  bool running = false;
  bool ended = false;  // its pidfd said so (reaped in the order they end)
  RankExit exit;
  // Another rank declared it lost: since when (the launcher waits a moment, in case it is dying
  // on its own), and by whom. Once the launcher sends it SIGKILL for that, exit.declared_lost_by
  // holds them.
  std::optional<std::chrono::steady_clock::time_point> declared_lost_at;
  std::vector<std::size_t> declared_lost_by;
  bool ending_lost() const noexcept { return !exit.declared_lost_by.empty(); }
};

/// "0.5 s", "30 s".
inline std::string format_seconds(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

/// Splits what arrived into lines, passing on each complete one. A line longer than 64 KiB (a
/// progress bar without newlines) is passed on in pieces, so memory stays bounded.
inline void emit_lines(LaunchedRank& r, std::size_t rank, int stream, std::string_view chunk,
                       const std::function<void(std::size_t, int, std::string_view)>& out) {
  std::string& buf = r.partial[stream - 1];
  buf.append(chunk);
  std::size_t start = 0;
  for (;;) {
    const auto nl = buf.find('\n', start);
    if (nl == std::string::npos) break;
    out(rank, stream, std::string_view(buf).substr(start, nl - start));
    start = nl + 1;
  }
  buf.erase(0, start);
  if (buf.size() > 64 * 1024) {
    out(rank, stream, buf);
    buf.clear();
  }
}

/// The first port of the kernel's ephemeral range (net.ipv4.ip_local_port_range), 32768 where it
/// cannot be read.
inline std::uint16_t ephemeral_port_floor() {
  unsigned low = 32768;
  if (std::FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    unsigned a = 0, b = 0;
    if (std::fscanf(f, "%u %u", &a, &b) == 2 && a > 0 && a <= 65535) low = a;
    std::fclose(f);
  }
  return static_cast<std::uint16_t>(low);
}

/// 32 bytes from the kernel's random source, in hex: a job's shared secret.
inline std::string random_job_secret() {
  unsigned char bytes[32];
  std::size_t have = 0;
  while (have < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + have, sizeof bytes - have, 0);
    if (n > 0) {
      have += static_cast<std::size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      throw ConfigError(std::string("flotilla-launch: cannot draw a secret for the job (getrandom): ") + std::strerror(errno));
    }
  }
  static constexpr char hex[] = "0123456789abcdef";
  std::string s;
  for (const unsigned char b : bytes) {
    s += hex[b >> 4];
    s += hex[b & 15];
  }
  return s;
}

}  // namespace detail

/// A port on `host` that nothing listens on now. It is chosen at random below the kernel's
/// ephemeral range, from which the kernel gives ports to outgoing connections and to bind(0): a
/// port from inside that range could be taken by another process's connection between this check
/// and the moment the coordinator listens on it (seen in CI as "Address already in use" when
/// other jobs ran beside the launcher). The kernel's choice of an ephemeral port is the fallback.
inline std::uint16_t pick_free_port(const std::string& host = "127.0.0.1") {
  boost::asio::io_context io;
  const unsigned floor = detail::ephemeral_port_floor();
  constexpr unsigned span = 16384, lowest = 1024;
  if (floor > lowest + 1024) {
    const unsigned first = floor > lowest + span ? floor - span : lowest;
    std::mt19937 pick(std::random_device{}());
    std::uniform_int_distribution<unsigned> port(first, floor - 1);
    for (int attempt = 0; attempt < 64; ++attempt) {
      try {
        return detail::listen_on(io, host, static_cast<std::uint16_t>(port(pick)), 0, "").port;
      } catch (const TransportError&) {  // in use: try another
      }
    }
  }
  return detail::listen_on(io, host, 0, 0, "flotilla-launch: cannot find a free port on " + host).port;
}

/// Runs a job of `o.ranks` processes to its end; see the file comment. Throws ConfigError when
/// the options are unusable or the program cannot be started (after stopping the ranks already
/// started).
inline LaunchResult launch(const LaunchOptions& o) {
  using Clock = std::chrono::steady_clock;
  if (o.ranks == 0) throw ConfigError("flotilla-launch: the job needs at least one rank (-n)");
  if (o.command.empty() || o.command[0].empty()) throw ConfigError("flotilla-launch: no program to run");
  auto print = o.on_output ? o.on_output : [](std::size_t rank, int stream, std::string_view line) {
    std::string s = "[rank " + std::to_string(rank) + "] ";
    s.append(line);
    s += '\n';
    detail::write_fd(stream, s);  // one write per line: lines of different ranks never interleave
  };
  auto message = o.on_message ? o.on_message : [](const std::string& m) {
    detail::write_fd(2, "flotilla-launch: " + m + "\n");
  };

  LaunchResult result;
  const std::uint16_t port = o.port ? o.port : pick_free_port(o.host);
  result.coordinator = detail::format_host_port(o.host, port);

  // The environment: this process's, less what the launcher sets, plus the extras.
  std::vector<std::string> base;
  auto overridden = [&](std::string_view var) {
    for (const char* name : {"FLOTILLA_RANK=", "FLOTILLA_WORLD_SIZE=", "FLOTILLA_LOCAL_RANK=", "FLOTILLA_COORDINATOR=",
                             "FLOTILLA_LAUNCH_REPORTS=", "FLOTILLA_LAUNCH_SECRET="})
      if (var.substr(0, std::strlen(name)) == name) return true;
    for (const auto& e : o.environment)
      if (const auto eq = e.find('='); eq != std::string::npos && var.substr(0, eq + 1) == std::string_view(e).substr(0, eq + 1))
        return true;
    return false;
  };
  detail::LaunchReports reports;
  for (char** e = environ; e && *e; ++e)
    if (!overridden(*e)) base.emplace_back(*e);
  for (const auto& e : o.environment) base.push_back(e);
  if (std::none_of(o.environment.begin(), o.environment.end(),
                   [](const std::string& e) { return e.rfind("FLOTILLA_RESTART=", 0) == 0; }))
    base.push_back("FLOTILLA_RESTART=0");
  if (o.job_secret) base.push_back("FLOTILLA_LAUNCH_SECRET=" + detail::random_job_secret());
  base.push_back("FLOTILLA_WORLD_SIZE=" + std::to_string(o.ranks));
  base.push_back("FLOTILLA_COORDINATOR=" + result.coordinator);
  if (!reports.path().empty()) base.push_back("FLOTILLA_LAUNCH_REPORTS=" + reports.path());

  std::vector<char*> argv;
  for (const auto& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  std::vector<detail::LaunchedRank> ranks(o.ranks);
  result.ranks.resize(o.ranks);
  auto signal_all = [&](int sig) {
    for (auto& r : ranks)
      if (r.running) {
        r.exit.stopped = true;
        ::kill(-r.pid, sig);  // the rank's process group: it and what it started
      }
  };
  auto give_up = [&](const std::string& why) {  // a rank could not be started: none is left behind
    signal_all(SIGKILL);
    for (auto& r : ranks)
      if (r.running) ::waitpid(r.pid, nullptr, 0);
    throw ConfigError("flotilla-launch: " + why);
  };

  for (std::size_t k = 0; k < o.ranks; ++k) {
    auto& r = ranks[k];
    // Close-on-exec from the start (dup2 onto 1 and 2 in the child clears it there), so that no
    // other child, of this launcher or of another thread of the program, inherits them.
    detail::Fd write_ends[2];
    for (int s = 0; s < 2; ++s) {
      int p[2];
#if defined(__linux__)
      const int rc = ::pipe2(p, O_CLOEXEC);
#else
      const int rc = ::pipe(p);
      if (rc == 0) {
        ::fcntl(p[0], F_SETFD, FD_CLOEXEC);
        ::fcntl(p[1], F_SETFD, FD_CLOEXEC);
      }
#endif
      if (rc != 0) give_up(std::string("cannot create a pipe: ") + std::strerror(errno));
      r.out[s] = detail::Fd(p[0]);
      write_ends[s] = detail::Fd(p[1]);
      ::fcntl(p[0], F_SETFL, ::fcntl(p[0], F_GETFL) | O_NONBLOCK);
    }

    std::vector<std::string> env = base;
    env.push_back("FLOTILLA_RANK=" + std::to_string(k));
    env.push_back("FLOTILLA_LOCAL_RANK=" + std::to_string(k));  // every rank on this host
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);

    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    ::posix_spawn_file_actions_init(&fa);
    ::posix_spawnattr_init(&attr);
    ::posix_spawn_file_actions_adddup2(&fa, write_ends[0].get(), 1);
    ::posix_spawn_file_actions_adddup2(&fa, write_ends[1].get(), 2);
    // Standard input goes to rank 0, as with mpirun; the other ranks read nothing.
    if (k > 0) ::posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&defaults, s);
    ::posix_spawnattr_setsigmask(&attr, &none);
    ::posix_spawnattr_setsigdefault(&attr, &defaults);
    ::posix_spawnattr_setpgroup(&attr, 0);
    ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid = -1;
    const int rc = ::posix_spawnp(&pid, o.command[0].c_str(), &fa, &attr, argv.data(), envp.data());
    ::posix_spawn_file_actions_destroy(&fa);
    ::posix_spawnattr_destroy(&attr);
    if (rc != 0) give_up("cannot start '" + o.command[0] + "': " + std::strerror(rc));
    r.pid = pid;
    r.running = true;
    r.pidfd = detail::Fd(detail::open_pidfd(pid));
  }

  const auto started = Clock::now();
  std::optional<std::size_t> observed;  // the first failure seen, before its cause is settled
  // How long a rank declared lost is left to end by itself (a killed rank's peers may see its
  // connections close a moment before the launcher can reap it).
  constexpr auto lost_confirm = std::chrono::milliseconds(100);
  Clock::time_point next_loss_scan{};
  Clock::time_point settle_until{};
  bool stopping = false, killed = false;
  Clock::time_point kill_at{};
  auto stop = [&](const std::string& why) {
    if (stopping) return;
    stopping = true;
    std::string names;
    for (std::size_t k = 0; k < ranks.size(); ++k)
      if (ranks[k].running) names += (names.empty() ? "" : ", ") + std::to_string(k);
    if (!names.empty()) message(why + "; stopping rank(s) " + names);
    signal_all(SIGTERM);
    kill_at = Clock::now() + o.grace;
  };

  std::vector<pollfd> fds;
  std::vector<std::pair<std::size_t, int>> what;  // (rank, 0/1 output or 2 pidfd)
  std::optional<Clock::time_point> drain_until;   // after the last exit: output still in the pipes
  for (;;) {
    // Reap. When a rank of a TCP job fails, the others fail a moment later because of it, and
    // often exit before it does. The rank named as the cause is found in three steps:
    //  1. the first failure seen: among exits seen in one poll, one killed by a signal (nobody
    //     fails by catching a SIGKILL) before one that exited with an error, one whose pidfd fired
    //     before one found by polling;
    //  2. from it, the ranks' reports (ReportDir) are followed to the rank that failed first;
    //  3. that rank is given a moment (settle) to end by itself before the others are stopped.
    std::optional<std::size_t> failed;
    auto rank_of_failure = [&](std::size_t k) {
      const auto& r = ranks[k];
      return std::tuple(r.exit.exited ? 1 : 0, r.ended ? 0 : 1, k);
    };
    for (std::size_t k = 0; k < ranks.size(); ++k) {
      auto& r = ranks[k];
      if (!r.running) continue;
      int st = 0;
      const pid_t w = ::waitpid(r.pid, &st, WNOHANG);
      if (w == 0 || (w < 0 && errno == EINTR)) continue;
      r.running = false;
      r.pidfd.reset();
      if (w > 0 && WIFEXITED(st)) {
        r.exit.exited = true;
        r.exit.status = WEXITSTATUS(st);
      } else if (w > 0 && WIFSIGNALED(st)) {
        r.exit.signal = WTERMSIG(st);
      }
      if (!r.exit.ok() && !r.exit.stopped && (!failed || rank_of_failure(k) < rank_of_failure(*failed))) failed = k;
    }
    // Ranks the job has declared lost while they still run (stopped, hung): they would never end
    // by themselves, and a job that goes on without them (--keep-going) would wait for them
    // forever. Each is given a moment to be reaped in case it is dying anyway, then ended.
    if (const auto now = Clock::now(); now >= next_loss_scan) {
      next_loss_scan = now + std::chrono::milliseconds(50);
      for (const auto& [lost, by] : reports.losses(ranks.size())) {
        auto& r = ranks[lost];
        if (!r.running || r.exit.stopped || lost == by) continue;
        if (!r.declared_lost_at) r.declared_lost_at = now;
        if (std::find(r.declared_lost_by.begin(), r.declared_lost_by.end(), by) == r.declared_lost_by.end())
          r.declared_lost_by.push_back(by);
      }
      for (std::size_t k = 0; k < ranks.size(); ++k) {
        auto& r = ranks[k];
        if (!r.running || r.ending_lost() || !r.declared_lost_at || now - *r.declared_lost_at < lost_confirm) continue;
        r.exit.declared_lost_by = r.declared_lost_by;
        std::sort(r.exit.declared_lost_by.begin(), r.exit.declared_lost_by.end());
        message(r.exit.stopped_responding(k) + "; ending it (SIGKILL)");
        ::kill(-r.pid, SIGKILL);
      }
    }
    if (failed && !observed) {
      observed = failed;
      settle_until = Clock::now() + std::min<Clock::duration>(o.grace, std::chrono::milliseconds(500));
    }
    if (observed && !result.first_failure) {
      std::size_t culprit = *observed;
      for (std::size_t step = 0; step < ranks.size(); ++step) {
        const auto said = reports.culprit(culprit, ranks.size());
        if (!said || *said == culprit) break;
        culprit = *said;
      }
      const bool culprit_ended = !ranks[culprit].running;
      const bool culprit_failed = culprit_ended && !ranks[culprit].exit.ok();
      const bool others_running = std::any_of(ranks.begin(), ranks.end(), [](const auto& r) { return r.running; });
      // A culprit the launcher is ending (declared lost) is waited for: it is about to be reaped.
      const bool culprit_ending = !culprit_ended && ranks[culprit].ending_lost();
      if (culprit_failed || !others_running || (Clock::now() >= settle_until && !culprit_ending)) {
        result.first_failure = culprit_failed ? culprit : *observed;
        if (o.stop_on_failure)
          stop(ranks[*result.first_failure].exit.describe(*result.first_failure));
      }
    }
    const bool any_running = std::any_of(ranks.begin(), ranks.end(), [](const auto& r) { return r.running; });
    const auto now = Clock::now();
    if (!any_running && !drain_until) drain_until = now + std::chrono::milliseconds(200);
    if (any_running) {
      if (o.interrupted && *o.interrupted && !result.interrupted) {
        result.interrupted = true;
        stop("interrupted");
      }
      if (o.timeout.count() > 0 && now - started >= o.timeout && !stopping) {
        result.timed_out = true;
        stop("the job did not finish within " + detail::format_seconds(o.timeout));
      }
      if (stopping && !killed && now >= kill_at) {
        killed = true;
        std::string names;
        for (std::size_t k = 0; k < ranks.size(); ++k)
          if (ranks[k].running) names += (names.empty() ? "" : ", ") + std::to_string(k);
        message("rank(s) " + names + " still running after " + std::to_string(o.grace.count()) + " ms; sending SIGKILL");
        signal_all(SIGKILL);
      }
    }

    // Wait for output, exits, or the next deadline.
    fds.clear();
    what.clear();
    bool have_pidfds = true;
    for (std::size_t k = 0; k < ranks.size(); ++k) {
      auto& r = ranks[k];
      for (int s = 0; s < 2; ++s)
        if (r.out[s]) {
          fds.push_back({r.out[s].get(), POLLIN, 0});
          what.emplace_back(k, s);
        }
      if (r.running) {
        if (r.pidfd) {
          fds.push_back({r.pidfd.get(), POLLIN, 0});
          what.emplace_back(k, 2);
        } else {
          have_pidfds = false;
        }
      }
    }
    if (!any_running && (fds.empty() || now >= *drain_until)) break;
    int ms = have_pidfds ? 100 : 10;
    if (!any_running) ms = std::min(ms, detail::poll_ms(*drain_until));
    if (o.interrupted) ms = std::min(ms, 50);
    if (observed && !result.first_failure) ms = std::min(ms, 10);
    const int rc = ::poll(fds.data(), static_cast<nfds_t>(fds.size()), ms);
    if (rc <= 0) continue;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const auto [k, s] = what[i];
      if (s == 2) {
        ranks[k].ended = true;  // reaped at the top of the loop
        continue;
      }
      char buf[16384];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        detail::emit_lines(ranks[k], k, s + 1, std::string_view(buf, static_cast<std::size_t>(n)), print);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        ranks[k].out[s].reset();
      }
    }
  }
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    for (int s = 0; s < 2; ++s)
      if (!ranks[k].partial[s].empty()) print(k, s + 1, ranks[k].partial[s]);
    result.ranks[k] = ranks[k].exit;
  }
  // Once more at the end, after whatever the stopped ranks printed meanwhile.
  if (result.first_failure) message(result.ranks[*result.first_failure].describe(*result.first_failure));
  return result;
}

/// What run_job() did: the last attempt's result and how many restarts it took.
struct JobResult {
  LaunchResult last;
  std::size_t restarts = 0;
  /// How each failed attempt ended, in order: "rank 2 was killed by signal 9 (Killed)".
  std::vector<std::string> failures;
  int exit_code() const noexcept { return last.exit_code(); }
};

/// Runs the job with launch(), and again, whole, up to `o.restarts` times while an attempt ends
/// because a rank failed. Each attempt's ranks have FLOTILLA_RESTART set to the attempt's number
/// and a fresh coordinator port (unless `o.port` fixes one). Every restart is announced through
/// `o.on_message` with the rank that failed and how.
inline JobResult run_job(const LaunchOptions& o) {
  auto message = o.on_message ? o.on_message : [](const std::string& m) {
    detail::write_fd(2, "flotilla-launch: " + m + "\n");
  };
  JobResult job;
  for (std::size_t attempt = 0;; ++attempt) {
    LaunchOptions a = o;
    a.environment.erase(std::remove_if(a.environment.begin(), a.environment.end(),
                                       [](const std::string& e) { return e.rfind("FLOTILLA_RESTART=", 0) == 0; }),
                        a.environment.end());
    a.environment.push_back("FLOTILLA_RESTART=" + std::to_string(attempt));
    job.last = launch(a);
    job.restarts = attempt;
    if (job.last.ok() || !job.last.first_failure || job.last.timed_out || job.last.interrupted) return job;
    const std::string how = job.last.ranks[*job.last.first_failure].describe(*job.last.first_failure);
    job.failures.push_back(how);
    if (attempt >= o.restarts) {
      if (o.restarts > 0) message(how + "; no restarts left (" + std::to_string(o.restarts) + " used)");
      return job;
    }
    message(how + "; restarting the job (restart " + std::to_string(attempt + 1) + " of " + std::to_string(o.restarts) +
            ")");
  }
}

}  // namespace flotilla::transport::tcp
#endif  // FLOTILLA_TRANSPORT_TCP_LAUNCH_HPP_INCLUDED
