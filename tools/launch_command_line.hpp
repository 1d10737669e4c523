// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
// flotilla-launch's command line: its usage text, and the parsing of its flags into the options of
// flotilla/transport/tcp/launch.hpp. The program's own; the tests check the parsing through it.
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "flotilla/core/error.hpp"
#include "flotilla/transport/tcp/launch.hpp"

namespace flotilla_launch {

namespace detail {

inline double parse_seconds(std::string_view flag, std::string_view text) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || !(v >= 0) || v > 1e7)
    throw flotilla::ConfigError("flotilla-launch: " + std::string(flag) + ": '" + std::string(text) + "' is not a number of seconds");
  return v;
}

}  // namespace detail

inline constexpr std::string_view usage =
    "usage: flotilla-launch -n N [--timeout S] [--grace S] [--restarts R | --keep-going] [--port P] [--env NAME=VALUE]...\n"
    "                       [--] program [args...]\n"
    "\n"
    "Starts N copies of the program on this machine as the ranks of a flotilla TCP job: each gets\n"
    "FLOTILLA_RANK (0 to N-1), FLOTILLA_WORLD_SIZE=N and FLOTILLA_COORDINATOR (a free loopback port),\n"
    "and its output lines are prefixed with [rank k]. If a rank fails, the others are stopped, and the\n"
    "launcher exits with that rank's status (128+signal if it was killed). A rank the others declare\n"
    "lost while its process still runs (stopped, hung) is named and ended with SIGKILL (status 137).\n"
    "The ranks share a fresh random secret of the job's own (used unless they are given one:\n"
    "FLOTILLA_SECRET, FLOTILLA_SECRET_FILE, --secret-file), so that no other process can join the job.\n"
    "\n"
    "  -n, --ranks N    number of ranks\n"
    "  --timeout S      stop the job after S seconds (exit status 124); default: no limit\n"
    "  --grace S        seconds between SIGTERM and SIGKILL when stopping ranks; default 2\n"
    "  --restarts R     when a rank fails, stop the others and start the whole job again, up to R\n"
    "                   times (each rank gets FLOTILLA_RESTART=attempt; a program that resumes from its\n"
    "                   checkpoints goes on from the newest complete set); default 0\n"
    "  --keep-going     when a rank fails, leave the others running (a parameter-server job whose\n"
    "                   workers go on without a lost one, TrainerOptions::on_worker_loss); a rank the\n"
    "                   job declared lost is still ended; the launcher exits with the failed rank's\n"
    "                   status once every rank has ended\n"
    "  --port P         the coordinator's port; default: a free one\n"
    "  --env NAME=VALUE an extra environment variable for every rank (repeatable)\n";

/// Parses flotilla-launch's command line into options. Throws ConfigError naming the flag and the
/// text on a bad argument; returns nothing for --help.
inline std::optional<flotilla::transport::tcp::LaunchOptions> parse_args(int argc, const char* const* argv) {
  flotilla::transport::tcp::LaunchOptions o;
  bool have_n = false;
  int i = 1;
  auto value = [&](std::string_view flag, std::string_view& arg) -> std::string_view {
    if (const auto eq = arg.find('='); eq != std::string_view::npos && arg.substr(0, 2) == "--") return arg.substr(eq + 1);
    if (i + 1 >= argc) throw flotilla::ConfigError("flotilla-launch: " + std::string(flag) + " needs a value");
    return argv[++i];
  };
  for (; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;  // the program
    const std::string_view name = arg.substr(0, arg.find('='));
    if (name == "-h" || name == "--help") return std::nullopt;
    if (name == "-n" || name == "-np" || name == "--ranks") {
      const auto v = value(name, arg);
      std::size_t n = 0;
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (v.empty() || ec != std::errc{} || end != v.data() + v.size() || n == 0 || n > 65535)
        throw flotilla::ConfigError("flotilla-launch: " + std::string(name) + ": '" + std::string(v) +
                          "' is not a number of ranks (1 to 65535)");
      o.ranks = n;
      have_n = true;
    } else if (name == "--timeout") {
      o.timeout = std::chrono::milliseconds(static_cast<long long>(detail::parse_seconds(name, value(name, arg)) * 1000));
    } else if (name == "--grace") {
      o.grace = std::chrono::milliseconds(static_cast<long long>(detail::parse_seconds(name, value(name, arg)) * 1000));
    } else if (name == "--restarts") {
      const auto v = value(name, arg);
      std::size_t n = 0;
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (v.empty() || ec != std::errc{} || end != v.data() + v.size() || n > 1000)
        throw flotilla::ConfigError("flotilla-launch: --restarts: '" + std::string(v) + "' is not a number of restarts (0 to 1000)");
      o.restarts = n;
    } else if (name == "--keep-going") {
      if (arg.find('=') != std::string_view::npos)
        throw flotilla::ConfigError("flotilla-launch: --keep-going takes no value ('" + std::string(arg) + "')");
      o.stop_on_failure = false;
    } else if (name == "--port") {
      const auto v = value(name, arg);
      unsigned p = 0;
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), p);
      if (v.empty() || ec != std::errc{} || end != v.data() + v.size() || p == 0 || p > 65535)
        throw flotilla::ConfigError("flotilla-launch: --port: '" + std::string(v) + "' is not a port (1 to 65535)");
      o.port = static_cast<std::uint16_t>(p);
    } else if (name == "--env") {
      const auto v = value(name, arg);
      if (v.find('=') == std::string_view::npos || v.front() == '=')
        throw flotilla::ConfigError("flotilla-launch: --env: '" + std::string(v) + "' is not NAME=VALUE");
      o.environment.emplace_back(v);
    } else {
      throw flotilla::ConfigError("flotilla-launch: unknown option " + std::string(arg) + " (see --help)");
    }
  }
  for (; i < argc; ++i) o.command.emplace_back(argv[i]);
  if (!have_n) throw flotilla::ConfigError("flotilla-launch: how many ranks? give -n N (see --help)");
  if (o.command.empty()) throw flotilla::ConfigError("flotilla-launch: no program given (flotilla-launch -n N -- program args...)");
  if (!o.stop_on_failure && o.restarts > 0)
    throw flotilla::ConfigError("flotilla-launch: --keep-going and --restarts do not mix: a restart starts the whole job again, "
                      "ranks that kept going included");
  return o;
}

}  // namespace flotilla_launch
