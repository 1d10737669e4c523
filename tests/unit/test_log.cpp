// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The log sink (core/log.hpp): records reach a sink the program sets, with level, component,
// message and the time; the minimum level filters them; FLOTILLA_LOG_LEVEL is read and a bad value
// named; the default sink's line, whole from many threads, to a file standing in for stderr; and
// messages of the library (a parameter server dropping a worker, a worker noting a lost one)
// reach a program's sink.
#include <doctest/doctest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "flotilla/codec/fp32.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/log.hpp"
#include "flotilla/optim/sgd.hpp"
#include "flotilla/topology/detail/parameter_server.hpp"
#include "flotilla/train/detail/live_workers.hpp"

namespace unit_log {

namespace fl = flotilla;
using fl::LogLevel;
using fl::LogRecord;

namespace {

/// Collects every record it is given; thread-safe on its own too, so that a test checks the
/// logger's serialisation, not the sink's.
struct Capture {
  std::mutex mutex;
  std::vector<LogRecord> records;
  fl::LogSink sink() {
    return [this](const LogRecord& r) {
      const std::lock_guard lock(mutex);
      records.push_back(r);
    };
  }
};

/// Sets the minimum level for a scope.
struct LevelFor {
  explicit LevelFor(LogLevel level) : previous(fl::log_level()) { fl::set_log_level(level); }
  ~LevelFor() { fl::set_log_level(previous); }
  LogLevel previous;
};

/// Sets (or unsets, with nullptr) an environment variable for a scope.
struct EnvironmentFor {
  EnvironmentFor(const char* variable, const char* value) : name(variable) {
    if (const char* old = std::getenv(name)) previous = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~EnvironmentFor() {
    if (previous)
      ::setenv(name, previous->c_str(), 1);
    else
      ::unsetenv(name);
  }
  const char* name;
  std::optional<std::string> previous;
};

/// File descriptor 2 sent to a temporary file for a scope: what the default sink writes there.
class StderrToFile {
 public:
  StderrToFile() : file_(std::tmpfile()) {
    REQUIRE(file_ != nullptr);
    std::fflush(stderr);
    saved_ = ::dup(2);
    REQUIRE(saved_ >= 0);
    REQUIRE(::dup2(::fileno(file_), 2) == 2);
  }
  ~StderrToFile() {
    restore();
    std::fclose(file_);
  }
  StderrToFile(const StderrToFile&) = delete;
  StderrToFile& operator=(const StderrToFile&) = delete;
  /// Puts stderr back and returns what was written meanwhile.
  std::string finish() {
    restore();
    std::string text;
    std::rewind(file_);
    char buf[65536];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, file_)) > 0) text.append(buf, n);
    return text;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  std::FILE* file_;
  int saved_ = -1;
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// "2026-11-28T10:31:02.123Z" back to a time point; nothing when it is not of that form.
std::optional<std::chrono::system_clock::time_point> parse_log_time(const std::string& text) {
  static const std::regex form(R"((\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z)");
  std::smatch m;
  if (!std::regex_match(text, m, form)) return std::nullopt;
  const auto number = [&](std::size_t i) { return std::stoi(m[i].str()); };
  const std::chrono::year_month_day date{std::chrono::year(number(1)),
                                         std::chrono::month(static_cast<unsigned>(number(2))),
                                         std::chrono::day(static_cast<unsigned>(number(3)))};
  if (!date.ok() || number(4) > 23 || number(5) > 59 || number(6) > 60) return std::nullopt;
  return std::chrono::sys_days(date) + std::chrono::hours(number(4)) + std::chrono::minutes(number(5)) +
         std::chrono::seconds(number(6)) + std::chrono::milliseconds(number(7));
}

/// The default sink's line: time, level, "flotilla:", component, message.
const std::regex line_form(R"((\S+) (debug|info|warning|error) flotilla: (.*))");

}  // namespace

TEST_CASE("log: records reach a sink the program sets, with level, component, message and the time") {
  Capture capture;
  const fl::ScopedLogSink scoped(capture.sink());
  const LevelFor level(LogLevel::info);
  const auto before = std::chrono::system_clock::now();
  fl::log_message(LogLevel::warning, "parameter server 2", "dropped worker 1, going on");
  fl::log_message(LogLevel::error, "", "no component");
  const auto after = std::chrono::system_clock::now();
  REQUIRE(capture.records.size() == 2);
  const LogRecord& r = capture.records[0];
  CHECK(r.level == LogLevel::warning);
  CHECK(r.component == "parameter server 2");
  CHECK(r.message == "dropped worker 1, going on");
  CHECK(r.time >= before);
  CHECK(r.time <= after);
  // The time as the default line writes it parses back to the same millisecond, close to now.
  const auto parsed = parse_log_time(fl::format_log_time(r.time));
  REQUIRE(parsed.has_value());
  CHECK(*parsed == std::chrono::floor<std::chrono::milliseconds>(r.time));
  CHECK(std::chrono::abs(std::chrono::system_clock::now() - *parsed) < std::chrono::seconds(5));
  CHECK(capture.records[1].level == LogLevel::error);
  CHECK(capture.records[1].component.empty());
}

TEST_CASE("log: set_log_sink returns the sink it replaces; the scoped sink puts the previous one back") {
  Capture outer, inner;
  const fl::LogSink before = fl::set_log_sink(outer.sink());
  {
    const fl::ScopedLogSink scoped(inner.sink());
    fl::log_message(LogLevel::error, "test", "to the inner sink");
  }
  fl::log_message(LogLevel::error, "test", "to the outer sink");
  const fl::LogSink mine = fl::set_log_sink(before);
  CHECK(static_cast<bool>(mine));  // outer's, handed back
  REQUIRE(inner.records.size() == 1);
  CHECK(inner.records[0].message == "to the inner sink");
  REQUIRE(outer.records.size() == 1);
  CHECK(outer.records[0].message == "to the outer sink");
  // The replaced sink is no longer called.
  Capture third;
  {
    const fl::ScopedLogSink scoped(third.sink());
    fl::log_message(LogLevel::error, "test", "to the third sink");
  }
  CHECK(outer.records.size() == 1);
  CHECK(third.records.size() == 1);
}

TEST_CASE("log: the minimum level drops the records below it") {
  Capture capture;
  const fl::ScopedLogSink scoped(capture.sink());
  {
    const LevelFor level(LogLevel::warning);
    CHECK(fl::log_level() == LogLevel::warning);
    CHECK_FALSE(fl::log_enabled(LogLevel::info));
    CHECK(fl::log_enabled(LogLevel::error));
    fl::log_message(LogLevel::debug, "c", "debug");
    fl::log_message(LogLevel::info, "c", "info");
    fl::log_message(LogLevel::warning, "c", "warning");
    fl::log_message(LogLevel::error, "c", "error");
  }
  {
    const LevelFor level(LogLevel::debug);
    fl::log_message(LogLevel::debug, "c", "debug shown");
  }
  std::vector<std::string> got;
  for (const auto& r : capture.records) got.push_back(r.message);
  CHECK(got == std::vector<std::string>{"warning", "error", "debug shown"});
}

TEST_CASE("log: FLOTILLA_LOG_LEVEL sets the minimum level; a bad value is an error naming the variable and the text") {
  {
    const EnvironmentFor env("FLOTILLA_LOG_LEVEL", nullptr);
    CHECK_FALSE(fl::log_level_from_environment().has_value());
    CHECK(fl::detail::Logger().level() == LogLevel::info);  // the default
  }
  {
    const EnvironmentFor env("FLOTILLA_LOG_LEVEL", "warning");
    CHECK(fl::log_level_from_environment() == LogLevel::warning);
    CHECK(fl::detail::Logger().level() == LogLevel::warning);
  }
  {
    const EnvironmentFor env("FLOTILLA_LOG_LEVEL", "DEBUG");
    CHECK(fl::log_level_from_environment() == LogLevel::debug);
  }
  {
    const EnvironmentFor env("FLOTILLA_LOG_LEVEL", "loud");
    CHECK_THROWS_WITH_AS(fl::log_level_from_environment(),
                         doctest::Contains("FLOTILLA_LOG_LEVEL=\"loud\": expected debug, info, warning or error"),
                         fl::ConfigError);
    // A logger cannot throw where it is first used: it keeps the default level, and the error is
    // its first record, before the one that found it.
    fl::detail::Logger logger;
    CHECK(logger.level() == LogLevel::info);
    Capture capture;
    logger.set_sink(capture.sink());
    logger.write(LogLevel::debug, "c", "below the level");
    logger.write(LogLevel::warning, "c", "first");
    logger.write(LogLevel::warning, "c", "second");
    REQUIRE(capture.records.size() == 3);
    CHECK(capture.records[0].level == LogLevel::error);
    CHECK(capture.records[0].message.find("FLOTILLA_LOG_LEVEL=\"loud\"") != std::string::npos);
    CHECK(capture.records[1].message == "first");
    CHECK(capture.records[2].message == "second");
  }
  CHECK(fl::parse_log_level("Warning") == LogLevel::warning);
  CHECK_FALSE(fl::parse_log_level("warn").has_value());
  CHECK_FALSE(fl::parse_log_level("").has_value());
}

TEST_CASE("log: the default line is time, level, flotilla, component and message") {
  const auto time = std::chrono::sys_days(std::chrono::year(2026) / 11 / 28) + std::chrono::hours(10) +
                    std::chrono::minutes(31) + std::chrono::seconds(2) + std::chrono::microseconds(123456);
  CHECK(fl::format_log_time(time) == "2026-11-28T10:31:02.123Z");
  LogRecord r{LogLevel::warning, time, "parameter server 0", "dropped worker 2, going on (1 still training)"};
  CHECK(fl::format_log_line(r) ==
        "2026-11-28T10:31:02.123Z warning flotilla: parameter server 0: dropped worker 2, going on (1 still training)");
  r.component.clear();
  r.level = LogLevel::debug;
  CHECK(fl::format_log_line(r) ==
        "2026-11-28T10:31:02.123Z debug flotilla: dropped worker 2, going on (1 still training)");
  // Leap day, the epoch, and the last millisecond of a year.
  CHECK(fl::format_log_time(std::chrono::sys_days(std::chrono::year(2024) / 2 / 29)) == "2024-02-29T00:00:00.000Z");
  CHECK(fl::format_log_time(std::chrono::system_clock::time_point{}) == "1970-01-01T00:00:00.000Z");
  CHECK(fl::format_log_time(std::chrono::sys_days(std::chrono::year(2027) / 1 / 1) - std::chrono::milliseconds(1)) ==
        "2026-12-31T23:59:59.999Z");
}

TEST_CASE("log: the default sink writes one whole line per record to stderr") {
  const LevelFor level(LogLevel::info);
  const fl::ScopedLogSink scoped(fl::LogSink{});  // the default, whatever an earlier test left
  StderrToFile err;
  fl::log_message(LogLevel::info, "checkpoint", "resuming from step 3");
  fl::log_message(LogLevel::debug, "checkpoint", "not shown");
  const std::vector<std::string> lines = lines_of(err.finish());
  REQUIRE(lines.size() == 1);
  std::smatch m;
  REQUIRE(std::regex_match(lines[0], m, line_form));
  CHECK(parse_log_time(m[1].str()).has_value());
  CHECK(m[2].str() == "info");
  CHECK(m[3].str() == "checkpoint: resuming from step 3");
}

TEST_CASE("log: records of 8 threads writing 1000 each arrive whole, to a sink and to stderr") {
  constexpr std::size_t threads = 8, each = 1000;
  const LevelFor level(LogLevel::info);
  // Long enough that a line written in pieces would be cut somewhere.
  const std::string padding(200, 'x');
  const auto text = [&](std::size_t t, std::size_t i) {
    return "record " + std::to_string(i) + " of thread " + std::to_string(t) + " " + padding;
  };
  const auto run = [&] {
    std::vector<std::thread> pool;
    for (std::size_t t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        for (std::size_t i = 0; i < each; ++i)
          fl::log_message(LogLevel::info, "thread " + std::to_string(t), text(t, i));
      });
    for (auto& th : pool) th.join();
  };

  SUBCASE("a sink of the program's") {
    // Deliberately no lock in the sink: the logger serialises the calls.
    std::vector<LogRecord> records;
    {
      const fl::ScopedLogSink scoped([&records](const LogRecord& r) { records.push_back(r); });
      run();
    }
    REQUIRE(records.size() == threads * each);
    std::vector<std::size_t> next(threads, 0);  // each thread's records arrive in its order
    for (const auto& r : records) {
      const std::size_t t = static_cast<std::size_t>(std::stoul(r.component.substr(7)));
      REQUIRE(t < threads);
      CHECK(r.message == text(t, next[t]));
      ++next[t];
    }
    CHECK(std::all_of(next.begin(), next.end(), [](std::size_t n) { return n == each; }));
  }

  SUBCASE("the default sink, to a file") {
    const fl::ScopedLogSink scoped(fl::LogSink{});
    StderrToFile err;
    run();
    const std::vector<std::string> lines = lines_of(err.finish());
    REQUIRE(lines.size() == threads * each);
    std::set<std::pair<std::size_t, std::size_t>> seen;
    const std::regex body(R"(thread (\d+): record (\d+) of thread (\d+) (x+))");
    std::size_t bad = 0;
    for (const auto& line : lines) {
      std::smatch m, b;
      const std::string whole = std::regex_match(line, m, line_form) ? m[3].str() : std::string();
      if (!std::regex_match(whole, b, body) || b[1].str() != b[3].str() || b[4].length() != 200 ||
          !parse_log_time(m[1].str())) {
        ++bad;
        continue;
      }
      seen.emplace(std::stoul(b[1].str()), std::stoul(b[2].str()));
    }
    CHECK(bad == 0);
    CHECK(seen.size() == threads * each);
  }
}

TEST_CASE("log: a sink that throws or logs itself does not lose the record or stop the caller") {
  const LevelFor level(LogLevel::info);
  SUBCASE("throws") {
    StderrToFile err;
    {
      const fl::ScopedLogSink scoped([](const LogRecord&) { throw std::runtime_error("the sink broke"); });
      CHECK_NOTHROW(fl::log_message(LogLevel::warning, "c", "kept"));
    }
    const std::string text = err.finish();
    CHECK(text.find("warning flotilla: c: kept") != std::string::npos);
    CHECK(text.find("the log sink threw: the sink broke") != std::string::npos);
  }
  SUBCASE("logs") {
    Capture capture;
    StderrToFile err;
    {
      const fl::ScopedLogSink scoped([&capture](const LogRecord& r) {
        capture.records.push_back(r);
        fl::log_message(LogLevel::info, "sink", "from inside the sink");  // would wait on itself
      });
      fl::log_message(LogLevel::info, "c", "outer");
    }
    const std::string text = err.finish();
    REQUIRE(capture.records.size() == 1);
    CHECK(capture.records[0].message == "outer");
    CHECK(text.find("info flotilla: sink: from inside the sink") != std::string::npos);
  }
}

// ---- the library's messages -------------------------------------------------------------------

namespace {

using fl::detail::PsHeader;

/// A Transport whose recv_any plays a script of worker messages, one worker lost among them.
class ScriptedEndpoint {
 public:
  struct Event {
    std::size_t from = 0;
    PsHeader header{};
    bool lost = false;
  };
  ScriptedEndpoint(std::size_t rank, std::size_t size, std::vector<Event> script)
      : rank_(rank), size_(size), script_(std::move(script)) {}
  std::size_t rank() const { return rank_; }
  std::size_t size() const { return size_; }
  fl::TrafficCounters counters() const { return {}; }
  void continue_without_lost_peers(bool) noexcept {}
  void send(std::size_t, fl::Tag, std::span<const std::byte>) {}
  void recv(std::size_t, fl::Tag, std::span<std::byte>) { throw std::logic_error("the script has no recv"); }
  void sendrecv(std::size_t, fl::Tag, std::span<const std::byte>, std::size_t, std::span<std::byte>) {
    throw std::logic_error("the script has no sendrecv");
  }
  void barrier() {}
  std::size_t recv_any(fl::Tag, std::span<std::byte> in) {
    if (next_ == script_.size()) throw std::logic_error("the script ended before the server did");
    const Event ev = script_[next_++];
    if (ev.lost) throw fl::PeerLostError("worker " + std::to_string(ev.from) + " lost (scripted)", ev.from);
    std::fill(in.begin(), in.end(), std::byte{0});
    ev.header.write(in.data());
    return ev.from;
  }

 private:
  std::size_t rank_, size_;
  std::vector<Event> script_;
  std::size_t next_ = 0;
};

/// Stands in for a transport in LiveWorkers: it names no peers and lists no losses.
struct PlainEndpoint {};

}  // namespace

TEST_CASE("log: a parameter server dropping a lost worker says so through the program's sink") {
  using Event = ScriptedEndpoint::Event;
  const auto push = [](std::size_t w) { return Event{w, PsHeader{PsHeader::push, 0, 0, 0, 0}}; };
  const auto done = [](std::size_t w) { return Event{w, PsHeader{PsHeader::done, 0, 0, 0, 0}}; };
  ScriptedEndpoint e(3, 4, {push(0), push(1), push(2), Event{1, {}, true}, done(0), done(2)});
  Capture capture;
  const fl::ScopedLogSink scoped(capture.sink());
  const LevelFor level(LogLevel::info);
  fl::TensorInfo t;
  t.size = 8;
  fl::detail::ParameterServerShard<float, fl::optim::SGD, fl::codec::Fp32> shard({0, 8}, std::vector<float>(8, 1.0f),
                                                                                 {t});
  fl::optim::SGD sgd;
  shard.serve(e, 3, false, std::numeric_limits<std::size_t>::max(), sgd, [](std::uint64_t) { return 1.0; });
  REQUIRE(shard.dropped_workers().size() == 1);
  const auto it = std::find_if(capture.records.begin(), capture.records.end(),
                               [](const LogRecord& r) { return r.message.starts_with("dropped worker"); });
  REQUIRE(it != capture.records.end());
  CHECK(it->level == LogLevel::warning);
  CHECK(it->component == "parameter server 3");
  CHECK(it->message == "dropped worker 1, going on (2 still training): worker 1 lost (scripted)");
}

TEST_CASE("log: a worker's note of a lost worker goes to the sink, or to a stream of the program's own") {
  const LevelFor level(LogLevel::info);
  SUBCASE("no stream, or std::cerr: the sink") {
    for (std::ostream* stream : {static_cast<std::ostream*>(nullptr), static_cast<std::ostream*>(&std::cerr)}) {
      Capture capture;
      const fl::ScopedLogSink scoped(capture.sink());
      fl::detail::LiveWorkers live(3, 0, 16, true, stream);
      PlainEndpoint e;
      live.update(e, {0, 1});
      REQUIRE(capture.records.size() == 1);
      CHECK(capture.records[0].level == LogLevel::warning);
      CHECK(capture.records[0].component == "worker 0");
      CHECK(capture.records[0].message ==
            "lost worker 2, which died or stalled; training goes on without it, 2 of 3 workers left; a synchronous "
            "step now averages 2 x 16 = 32 samples instead of 48");
    }
  }
  SUBCASE("a stream of the program's: the line it always had, and nothing to the sink") {
    Capture capture;
    const fl::ScopedLogSink scoped(capture.sink());
    std::ostringstream out;
    fl::detail::LiveWorkers live(3, 0, 16, false, &out);
    PlainEndpoint e;
    live.update(e, {0, 1});
    live.update(e, {0, 1, 2});
    CHECK(capture.records.empty());
    CHECK(out.str() ==
          "flotilla: worker 0: lost worker 2, which died or stalled; training goes on without it, 2 of 3 workers left\n"
          "flotilla: worker 0: worker 2 rejoined; training goes on with 3 of 3 workers\n");
  }
}

}  // namespace unit_log
