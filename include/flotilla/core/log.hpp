// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_LOG_HPP_INCLUDED
#define FLOTILLA_CORE_LOG_HPP_INCLUDED
// Where everything the library says goes: one sink for the messages of parameter servers,
// transports, checkpoints and workers, each a record with a level, a time, the part of the
// library that speaks (its component: "parameter server 2", "tcp rank 0 of 4", "checkpoint") and
// the text. A program routes them to its own logger with set_log_sink (docs/logging.md).
//
// The default sink writes one line per record to stderr,
//   2026-11-28T10:31:02.123Z warning flotilla: parameter server 0: dropped worker 2, going on (...)
// in one write(2), so that lines of threads, and of processes sharing the stream (ranks under a
// launcher), never interleave mid-line; unbuffered, so that a line written just before the process
// ends (the MPI watchdog's) is not lost. Records below the minimum level (default info; the
// environment variable FLOTILLA_LOG_LEVEL, read at first use; set_log_level) are dropped before
// they are formatted.
//
// Progress bars and epoch summaries are not log records: they are output a program asked for, on
// the stream it gave (FitOptions::log, train/progress.hpp).
#include <unistd.h>

#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <exception>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

#include "flotilla/core/error.hpp"

namespace flotilla {

/// How much a record matters; a sink receives those at or above the minimum level.
enum class LogLevel { debug, info, warning, error };

/// "debug", "info", "warning", "error": the level's name in a line and in FLOTILLA_LOG_LEVEL.
constexpr std::string_view log_level_name(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warning: return "warning";
    case LogLevel::error: return "error";
  }
  return "?";
}

/// The level named `text` (as log_level_name writes it, in any case); nothing for another text.
inline std::optional<LogLevel> parse_log_level(std::string_view text) noexcept {
  for (const LogLevel level : {LogLevel::debug, LogLevel::info, LogLevel::warning, LogLevel::error}) {
    const std::string_view name = log_level_name(level);
    if (text.size() != name.size()) continue;
    bool matches = true;
    for (std::size_t i = 0; i < text.size() && matches; ++i)
      matches = std::tolower(static_cast<unsigned char>(text[i])) == name[i];
    if (matches) return level;
  }
  return std::nullopt;
}

/// The environment variable that sets the minimum level.
inline constexpr const char* log_level_variable = "FLOTILLA_LOG_LEVEL";

/// FLOTILLA_LOG_LEVEL's level; nothing when it is unset or empty. Another value is a ConfigError
/// naming the variable and the text, rather than silently the default: a typo would otherwise hide
/// the very messages it was set to show. The process's sink reads it once, at its first use (it
/// cannot throw there: it reports a bad value as its first record, an error, and keeps the
/// default); a program that wants a bad value to stop it calls this at its start.
inline std::optional<LogLevel> log_level_from_environment() {
  const char* text = std::getenv(log_level_variable);
  if (text == nullptr || *text == '\0') return std::nullopt;
  if (const auto level = parse_log_level(text)) return level;
  throw ConfigError(std::string(log_level_variable) + "=\"" + text + "\": expected debug, info, warning or error");
}

/// One message of the library's.
struct LogRecord {
  LogLevel level = LogLevel::info;
  std::chrono::system_clock::time_point time;  ///< when it was made (wall clock)
  std::string component;                       ///< who speaks: "parameter server 2", "tcp rank 0 of 4", "checkpoint"
  std::string message;                         ///< what it says, one line without its newline
};

/// Receives every record at or above the minimum level. Calls are serialised (one at a time, from
/// any of the program's threads), so a sink needs no lock of its own; it must not log through
/// flotilla or replace the sink itself (a record it logs goes to the default sink instead).
using LogSink = std::function<void(const LogRecord&)>;

/// `time` in UTC, ISO 8601 with milliseconds: "2026-11-28T10:31:02.123Z".
inline std::string format_log_time(std::chrono::system_clock::time_point time) {
  const auto ms = std::chrono::floor<std::chrono::milliseconds>(time);
  const auto day = std::chrono::floor<std::chrono::days>(ms);
  const std::chrono::year_month_day date(day);
  const std::chrono::hh_mm_ss<std::chrono::milliseconds> clock(ms - day);
  std::string out;
  out.reserve(24);
  const auto digits = [&out](long long value, int width) {
    std::array<char, 24> buf{};
    int n = 0;
    if (value < 0) {
      out += '-';
      value = -value;
    }
    do {
      buf[static_cast<std::size_t>(n++)] = static_cast<char>('0' + value % 10);
      value /= 10;
    } while (value > 0 && n < static_cast<int>(buf.size()));
    for (int i = n; i < width; ++i) out += '0';
    while (n > 0) out += buf[static_cast<std::size_t>(--n)];
  };
  digits(static_cast<int>(date.year()), 4);
  out += '-';
  digits(static_cast<unsigned>(date.month()), 2);
  out += '-';
  digits(static_cast<unsigned>(date.day()), 2);
  out += 'T';
  digits(clock.hours().count(), 2);
  out += ':';
  digits(clock.minutes().count(), 2);
  out += ':';
  digits(clock.seconds().count(), 2);
  out += '.';
  digits(clock.subseconds().count(), 3);
  out += 'Z';
  return out;
}

/// The default sink's line for `r`, without its newline:
/// "<time> <level> flotilla: <component>: <message>" ("flotilla: <message>" without a component).
inline std::string format_log_line(const LogRecord& r) {
  std::string line = format_log_time(r.time);
  line += ' ';
  line += log_level_name(r.level);
  line += " flotilla: ";
  if (!r.component.empty()) {
    line += r.component;
    line += ": ";
  }
  line += r.message;
  return line;
}

namespace detail {

/// Writes `line` and a newline to file descriptor `fd` in one write where the system takes it
/// whole (it does for pipes up to PIPE_BUF bytes and for files), retrying what a signal or a full
/// pipe cut short. Errors are ignored: there is nowhere left to report them.
inline void write_log_line(int fd, std::string_view line) noexcept {
  try {
    std::string text;
    text.reserve(line.size() + 1);
    text.append(line);
    text += '\n';
    const char* p = text.data();
    std::size_t left = text.size();
    while (left > 0) {
      const ssize_t n = ::write(fd, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        return;
      }
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  } catch (...) {
  }
}

}  // namespace detail

/// What the library does with a record when no sink is set: its line (format_log_line) to stderr.
inline void default_log_sink(const LogRecord& r) noexcept {
  try {
    detail::write_log_line(2, format_log_line(r));
  } catch (...) {
  }
}

namespace detail {

/// A sink and a minimum level. The process has one (process_logger); tests make their own to read
/// the environment afresh.
class Logger {
 public:
  /// Reads FLOTILLA_LOG_LEVEL; a bad value leaves the default, and becomes the first record.
  Logger() {
    try {
      if (const auto level = log_level_from_environment()) level_.store(*level, std::memory_order_relaxed);
    } catch (const ConfigError& e) {
      environment_error_ = e.what();
      environment_error_ += "; logging at info";
      error_pending_.store(true, std::memory_order_relaxed);
    }
  }
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;

  /// Installs `sink` (empty: the default) and returns the one it replaces (empty if that was the
  /// default). Once it returns, the replaced sink is not running and will not be called again.
  LogSink set_sink(LogSink sink) {
    const std::lock_guard lock(mutex_);
    std::swap(sink, sink_);
    return sink;
  }
  void set_level(LogLevel level) noexcept { level_.store(level, std::memory_order_relaxed); }
  LogLevel level() const noexcept { return level_.load(std::memory_order_relaxed); }
  bool enabled(LogLevel level) const noexcept { return level >= this->level(); }

  /// Hands a record to the sink, if `level` is enabled. Never throws, whatever the sink does: the
  /// callers are often reporting a failure, and must go on to handle it.
  void write(LogLevel level, std::string_view component, std::string_view message) noexcept {
    if (!enabled(level) && !error_pending_.load(std::memory_order_relaxed)) return;
    try {
      LogRecord r{level, std::chrono::system_clock::now(), std::string(component), std::string(message)};
      // A sink that logs would wait on itself for the lock: its records take the default sink.
      thread_local bool inside = false;
      if (inside) {
        default_log_sink(r);
        return;
      }
      const std::lock_guard lock(mutex_);
      inside = true;
      struct Leave {
        bool& flag;
        ~Leave() { flag = false; }
      } leave{inside};
      if (error_pending_.exchange(false, std::memory_order_relaxed))
        deliver(LogRecord{LogLevel::error, r.time, "log", std::exchange(environment_error_, {})});
      if (!enabled(level)) return;
      deliver(r);
    } catch (...) {
    }
  }

 private:
  void deliver(const LogRecord& r) noexcept {
    try {
      if (sink_)
        sink_(r);
      else
        default_log_sink(r);
    } catch (const std::exception& e) {
      default_log_sink(r);
      default_log_sink(LogRecord{LogLevel::error, r.time, "log", std::string("the log sink threw: ") + e.what()});
    } catch (...) {
      default_log_sink(r);
      default_log_sink(LogRecord{LogLevel::error, r.time, "log", "the log sink threw"});
    }
  }

  std::mutex mutex_;
  LogSink sink_;  // empty: default_log_sink
  std::atomic<LogLevel> level_{LogLevel::info};
  std::string environment_error_;  // FLOTILLA_LOG_LEVEL's error, until it is delivered (under mutex_)
  std::atomic<bool> error_pending_{false};
};

/// The process's logger. This is the one piece of process-wide mutable state in flotilla, and on
/// purpose: a message must be reachable from every thread and layer (a parameter server's loop, a
/// transport's handshake, the MPI watchdog's thread) without threading a logger through every API,
/// and a program sets its sink once for all of them. A function-local static of an inline function
/// is one object across all translation units. It is never destroyed, so that a thread still
/// logging while the program exits (the watchdog, a server) finds it intact.
inline Logger& process_logger() {
  static Logger* const logger = new Logger();
  return *logger;
}

}  // namespace detail

/// Replaces the process's sink with `sink` (empty: the default, lines to stderr) and returns the
/// previous one (empty when it was the default), so that a caller can put it back. Thread-safe;
/// once it returns, the replaced sink is no longer called.
inline LogSink set_log_sink(LogSink sink) { return detail::process_logger().set_sink(std::move(sink)); }

/// The minimum level: records below it are dropped. Default info, or FLOTILLA_LOG_LEVEL.
inline void set_log_level(LogLevel level) noexcept { detail::process_logger().set_level(level); }
inline LogLevel log_level() noexcept { return detail::process_logger().level(); }
inline bool log_enabled(LogLevel level) noexcept { return detail::process_logger().enabled(level); }

/// Logs `message` as `component` at `level`: how every part of flotilla speaks, and open to a
/// program's own code. Never throws.
inline void log_message(LogLevel level, std::string_view component, std::string_view message) noexcept {
  detail::process_logger().write(level, component, message);
}

/// Installs a sink for a scope and puts the previous one back at its end.
class ScopedLogSink {
 public:
  explicit ScopedLogSink(LogSink sink) : previous_(set_log_sink(std::move(sink))) {}
  ~ScopedLogSink() { set_log_sink(std::move(previous_)); }
  ScopedLogSink(const ScopedLogSink&) = delete;
  ScopedLogSink& operator=(const ScopedLogSink&) = delete;

 private:
  LogSink previous_;
};

namespace detail {

/// A message for a stream a program may have chosen (FitOptions::log): with its own stream, the
/// line it always had ("flotilla: <component>: <message>") goes there; with none, std::cerr or
/// std::clog (stderr, the sink's default place) the record goes to the sink, so that a program that
/// routes flotilla's records gets these too.
inline void log_to(std::ostream* stream, LogLevel level, std::string_view component, std::string_view message) {
  if (stream == nullptr || stream == &std::cerr || stream == &std::clog) {
    log_message(level, component, message);
    return;
  }
  std::string line = "flotilla: ";
  if (!component.empty()) {
    line += component;
    line += ": ";
  }
  line += message;
  line += '\n';
  *stream << line;
  stream->flush();
}

}  // namespace detail

}  // namespace flotilla
#endif  // FLOTILLA_CORE_LOG_HPP_INCLUDED
