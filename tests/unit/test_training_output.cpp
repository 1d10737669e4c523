// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The training loop's I/O: confusion matrix, metrics log, SVG plot, progress bar, checkpoint file.
#include <doctest/doctest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <bit>
#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/train/checkpoint_format.hpp"
#include "flotilla/train/confusion.hpp"
#include "flotilla/train/history.hpp"
#include "flotilla/train/metrics_log.hpp"
#include "flotilla/train/plot.hpp"
#include "flotilla/train/progress.hpp"

namespace unit_train_io {

namespace fs = std::filesystem;
using flotilla::CheckpointError;
using flotilla::ConfigError;
using flotilla::ConfusionMatrix;
using flotilla::EpochRecord;
using flotilla::History;
using flotilla::MetricsLog;
using flotilla::ProgressBar;

namespace {

/// A fresh directory under the system's temporary directory, removed with everything in it.
struct TempDir {
  fs::path path;
  TempDir() {
    static std::atomic<int> counter{0};
    path = fs::temp_directory_path() /
           ("flotilla-test-io-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path operator/(const std::string& name) const { return path / name; }
};

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool same_bits(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const flotilla::Error& e) {
    return e.what();
  }
  return "(no exception)";
}

// ---- a minimal JSON-object reader, enough for one metrics line --------------------------------
struct JsonLine {
  std::vector<std::string> keys;
  std::map<std::string, std::optional<double>> values;  // nullopt: null
};

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

JsonLine parse_json_line(std::string_view s) {
  JsonLine out;
  std::size_t i = 0;
  const auto expect = [&](char c) {
    REQUIRE(i < s.size());
    REQUIRE(s[i] == c);
    ++i;
  };
  const auto string = [&] {
    expect('"');
    std::string v;
    while (true) {
      REQUIRE(i < s.size());
      const char c = s[i++];
      REQUIRE(static_cast<unsigned char>(c) >= 0x20);  // control characters must be escaped
      if (c == '"') break;
      if (c != '\\') {
        v += c;
        continue;
      }
      const char e = s[i++];
      if (e == 'n')
        v += '\n';
      else if (e == 'r')
        v += '\r';
      else if (e == 't')
        v += '\t';
      else if (e == '"' || e == '\\' || e == '/')
        v += e;
      else if (e == 'u') {
        std::uint32_t cp = 0;
        REQUIRE(std::from_chars(s.data() + i, s.data() + i + 4, cp, 16).ptr == s.data() + i + 4);
        i += 4;
        append_utf8(v, cp);
      } else {
        FAIL("bad escape");
      }
    }
    return v;
  };
  expect('{');
  while (true) {
    const std::string key = string();
    expect(':');
    std::optional<double> value;
    if (s.substr(i, 4) == "null") {
      i += 4;
    } else {
      double d = 0;
      const auto r = std::from_chars(s.data() + i, s.data() + s.size(), d);
      REQUIRE(r.ec == std::errc());
      i = static_cast<std::size_t>(r.ptr - s.data());
      value = d;
    }
    REQUIRE(out.values.count(key) == 0);
    out.keys.push_back(key);
    out.values[key] = value;
    if (s[i] == ',') {
      ++i;
      continue;
    }
    expect('}');
    break;
  }
  REQUIRE(i == s.size());
  return out;
}

std::vector<std::string> parse_csv_line(std::string_view line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

double parse_double(const std::string& s) {
  double d = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), d);
  REQUIRE(r.ec == std::errc());
  REQUIRE(r.ptr == s.data() + s.size());
  return d;
}

}  // namespace

// ---- ConfusionMatrix -------------------------------------------------------------------------

TEST_CASE("train io: confusion matrix numbers on a hand-computed example") {
  // (predicted, actual): class 0 is right 3 of 4 times, class 1 2 of 4, class 2 always;
  // class 3 never occurs and is never predicted.
  const std::vector<std::pair<std::size_t, std::size_t>> samples = {{0, 0}, {0, 0}, {0, 0}, {1, 0}, {1, 1},
                                                                    {1, 1}, {0, 1}, {2, 1}, {2, 2}, {2, 2}};
  ConfusionMatrix m(4), a(4), b(4);
  for (std::size_t i = 0; i < samples.size(); ++i) {
    m.add(samples[i].first, samples[i].second);
    (i % 2 ? a : b).add(samples[i].first, samples[i].second);
  }
  CHECK(m.total() == 10);
  CHECK(m.count(0, 0) == 3);
  CHECK(m.count(0, 1) == 1);  // actual 0 predicted as 1
  CHECK(m.count(1, 0) == 1);
  CHECK(m.count(1, 2) == 1);
  CHECK(m.accuracy() == doctest::Approx(0.7));
  CHECK(m.precision(0) == doctest::Approx(3.0 / 4));
  CHECK(m.precision(1) == doctest::Approx(2.0 / 3));
  CHECK(m.precision(2) == doctest::Approx(2.0 / 3));
  CHECK(m.recall(0) == doctest::Approx(3.0 / 4));
  CHECK(m.recall(1) == doctest::Approx(2.0 / 4));
  CHECK(m.recall(2) == doctest::Approx(1.0));
  CHECK(m.f1(0) == doctest::Approx(0.75));
  CHECK(m.f1(1) == doctest::Approx(4.0 / 7));
  CHECK(m.f1(2) == doctest::Approx(0.8));
  // Never predicted, never present: 0, not NaN.
  CHECK(m.precision(3) == 0.0);
  CHECK(m.recall(3) == 0.0);
  CHECK(m.f1(3) == 0.0);
  CHECK(ConfusionMatrix(3).accuracy() == 0.0);

  // Merging the workers' halves gives the same counts.
  a.add(b);
  for (std::size_t i = 0; i < 4; ++i) {
    for (std::size_t j = 0; j < 4; ++j) CHECK(a.count(i, j) == m.count(i, j));
  }
  a.add(0, 0, 5);
  CHECK(a.total() == 15);
  a.clear();
  CHECK(a.total() == 0);

  CHECK_THROWS_AS(m.add(4, 0), ConfigError);
  CHECK_THROWS_AS(m.add(ConfusionMatrix(3)), ConfigError);
  CHECK_THROWS_AS(ConfusionMatrix(0), ConfigError);
}

TEST_CASE("train io: confusion matrix report is aligned") {
  ConfusionMatrix m(3);
  m.add(0, 0, 1234);
  m.add(1, 0, 5);
  m.add(1, 1, 7);
  const std::array<std::string_view, 3> names = {"T-shirt/top", "Straße", "never"};
  const std::string r = m.report(names);
  INFO(r);
  const auto lines = split_lines(r);
  REQUIRE(lines.size() >= 10);
  // Header, three classes and the accuracy row: one width (the widths count code points).
  const auto width = [](const std::string& s) { return flotilla::detail::report_display_width(s); };
  for (std::size_t i = 1; i < 5; ++i) CHECK(width(lines[i]) == width(lines[0]));
  CHECK(r.find("Straße") != std::string::npos);
  CHECK(lines[3].find("n/a") != std::string::npos);     // class 2 is neither present nor predicted
  CHECK(lines[4].find("0.9960") != std::string::npos);  // accuracy 1241 / 1246
  CHECK(r.find("1234") != std::string::npos);
  CHECK_THROWS_AS(m.report(std::span<const std::string_view>(names.data(), 2)), ConfigError);
  CHECK_FALSE(m.report().empty());
}

// ---- MetricsLog --------------------------------------------------------------------------------

namespace {
std::vector<EpochRecord> tricky_records() {
  std::vector<EpochRecord> rs(3);
  rs[0] = {1,         469,
           0.1,       1.0 / 3,
           0.2,       std::nullopt,
           12345.678, 4.25,
           0.01,      {{"grad_norm", 1e-300}, {"a\"b\\c\nd", 5e-324}, {"ünï,x", -0.0}}};
  rs[1] = {2,
           938,
           std::numeric_limits<double>::quiet_NaN(),
           0.9999999999999999,
           std::nullopt,
           0.5,
           std::numeric_limits<double>::infinity(),
           1.7976931348623157e308,
           3e-5,
           {{"grad_norm", 2.5}}};
  rs[2] = {3,
           1407,
           -std::numeric_limits<double>::infinity(),
           0,
           0.3,
           0.97,
           1,
           2,
           0.1 + 0.2,
           {{"a\"b\\c\nd", 7}, {"late", 1}, {"grad_norm", 0.125}}};
  return rs;
}
}  // namespace

TEST_CASE("train io: JSON lines round-trip exactly") {
  TempDir dir;
  const auto rs = tricky_records();
  {
    MetricsLog log(dir / "m.jsonl");
    CHECK(log.format() == MetricsLog::Format::jsonl);
    log.write(rs[0]);
    // Already on disk, before the log is closed.
    CHECK(split_lines(read_text(dir / "m.jsonl")).size() == 1);
    log.write(rs[1]);
    log.write(rs[2]);
  }
  const auto lines = split_lines(read_text(dir / "m.jsonl"));
  REQUIRE(lines.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    INFO(lines[i]);
    const JsonLine j = parse_json_line(lines[i]);
    const EpochRecord& r = rs[i];
    const std::vector<std::string> fixed(std::begin(flotilla::detail::metrics_fixed_columns),
                                         std::end(flotilla::detail::metrics_fixed_columns));
    REQUIRE(j.keys.size() == fixed.size() + r.extra.size());
    for (std::size_t k = 0; k < fixed.size(); ++k) CHECK(j.keys[k] == fixed[k]);
    const auto check = [&](const std::string& key, std::optional<double> want) {
      INFO(key);
      if (!want || !std::isfinite(*want)) {
        CHECK_FALSE(j.values.at(key).has_value());
      } else {
        REQUIRE(j.values.at(key).has_value());
        CHECK(same_bits(*j.values.at(key), *want));
      }
    };
    check("epoch", static_cast<double>(r.epoch));
    check("step", static_cast<double>(r.step));
    check("train_loss", r.train_loss);
    check("train_accuracy", r.train_accuracy);
    check("val_loss", r.val_loss);
    check("val_accuracy", r.val_accuracy);
    check("samples_per_second", r.samples_per_second);
    check("seconds", r.seconds);
    check("learning_rate", r.learning_rate);
    for (std::size_t k = 0; k < r.extra.size(); ++k) {
      CHECK(j.keys[fixed.size() + k] == r.extra[k].first);
      check(r.extra[k].first, r.extra[k].second);
    }
  }
}

TEST_CASE("train io: CSV round-trips, columns fixed by the first record") {
  TempDir dir;
  const auto rs = tricky_records();
  {
    MetricsLog log(dir / "m.CSV");
    CHECK(log.format() == MetricsLog::Format::csv);
    for (const auto& r : rs) log.write(r);
  }
  const auto lines = split_lines(read_text(dir / "m.CSV"));
  REQUIRE(lines.size() == 5);  // one header, and one extra's name holds a line break
  const std::string text = read_text(dir / "m.CSV");
  CHECK(text.find("\"a\"\"b\\c\nd\",\"ünï,x\"\n") != std::string::npos);

  // Split on the record ends, which are the line breaks outside quotes.
  std::vector<std::vector<std::string>> rows;
  {
    std::string cur;
    bool quoted = false;
    for (const char c : text) {
      if (c == '"') quoted = !quoted;
      if (c == '\n' && !quoted) {
        rows.push_back(parse_csv_line(cur));
        cur.clear();
      } else {
        cur += c;
      }
    }
  }
  REQUIRE(rows.size() == 4);
  const auto& header = rows[0];
  CHECK(header[0] == "epoch");
  CHECK(header[8] == "learning_rate");
  CHECK(header[9] == "grad_norm");
  CHECK(rows[0][10] == "a\"b\\c\nd");
  CHECK(rows[0][11] == "ünï,x");
  for (const auto& row : rows) CHECK(row.size() == 12);
  CHECK(rows[1][0] == "1");
  CHECK(rows[1][1] == "469");
  CHECK(same_bits(parse_double(rows[1][3]), 1.0 / 3));
  CHECK(rows[1][5].empty());  // val_accuracy not measured
  CHECK(same_bits(parse_double(rows[1][9]), 1e-300));
  CHECK(same_bits(parse_double(rows[1][10]), 5e-324));
  CHECK(same_bits(parse_double(rows[1][11]), -0.0));
  CHECK(rows[2][2] == "nan");
  CHECK(rows[2][4].empty());
  CHECK(rows[2][6] == "inf");
  CHECK(same_bits(parse_double(rows[2][7]), 1.7976931348623157e308));
  CHECK(same_bits(parse_double(rows[2][9]), 2.5));
  CHECK(rows[2][10].empty());  // this record lacks the extra
  CHECK(rows[3][2] == "-inf");
  CHECK(same_bits(parse_double(rows[3][8]), 0.1 + 0.2));
  CHECK(same_bits(parse_double(rows[3][9]), 0.125));  // extras matched by name, not position
  CHECK(parse_double(rows[3][10]) == 7);
  CHECK(text.find("late") == std::string::npos);  // not a column: left out
}

TEST_CASE("train io: metrics log append, bad paths, bad extras") {
  TempDir dir;
  const auto rs = tricky_records();
  {
    MetricsLog log(dir / "m.csv");
    log.write(rs[0]);
  }
  {
    std::ofstream(dir / "m.csv", std::ios::app) << "2,938,0.5";  // a record cut short by a kill
  }
  {
    MetricsLog log(dir / "m.csv", MetricsLog::Format::from_extension, MetricsLog::OpenMode::append);
    log.write(rs[2]);
  }
  const std::string text = read_text(dir / "m.csv");
  CHECK(text.find("2,938,0.5") == std::string::npos);
  CHECK(text.find("epoch,") == 0);
  CHECK(text.find("epoch,", 1) == std::string::npos);  // one header
  CHECK(split_lines(text).size() == 4);                // the header's quoted name holds a line break
  CHECK(text.substr(text.size() - 10) == ",0.125,7,\n");

  const std::string missing = (dir / "no-such-dir" / "m.jsonl").string();
  const std::string e = error_of([&] { MetricsLog log(missing); });
  CHECK(e.find(missing) != std::string::npos);
  CHECK(e.find("No such file or directory") != std::string::npos);
  CHECK_THROWS_AS(MetricsLog(dir / "m.txt"), ConfigError);
  // A .json file would have to be one JSON document; the log is a line an epoch.
  const std::string json_error = error_of([&] { MetricsLog log(dir / "m.json"); });
  CHECK(json_error.find("m.json") != std::string::npos);
  CHECK(json_error.find("name it .jsonl") != std::string::npos);
  CHECK(!std::filesystem::exists(dir / "m.json"));
  CHECK_NOTHROW(MetricsLog(dir / "m.txt", MetricsLog::Format::jsonl));

  MetricsLog log(dir / "x.jsonl");
  EpochRecord r;
  r.extra = {{"epoch", 1}};
  CHECK_THROWS_AS(log.write(r), ConfigError);
  r.extra = {{"g", 1}, {"g", 2}};
  CHECK_THROWS_AS(log.write(r), ConfigError);
}

// ---- SVG plot ----------------------------------------------------------------------------------

namespace {
/// Checks that the SVG is well-formed XML as far as tags go, and returns the names of its elements.
std::vector<std::string> check_svg(const std::string& svg) {
  std::vector<std::string> stack, seen;
  std::size_t i = 0;
  REQUIRE(svg.rfind("<?xml", 0) == 0);
  while ((i = svg.find('<', i)) != std::string::npos) {
    const std::size_t end = svg.find('>', i);
    REQUIRE(end != std::string::npos);
    const std::string tag = svg.substr(i + 1, end - i - 1);
    i = end + 1;
    REQUIRE(!tag.empty());
    if (tag[0] == '?') continue;
    REQUIRE(tag.find('<') == std::string::npos);
    if (tag[0] == '/') {
      REQUIRE(!stack.empty());
      CHECK(stack.back() == tag.substr(1));
      stack.pop_back();
      continue;
    }
    const std::string name = tag.substr(0, tag.find_first_of(" /"));
    seen.push_back(name);
    if (tag.back() != '/') stack.push_back(name);
  }
  CHECK(stack.empty());
  CHECK(std::count(seen.begin(), seen.end(), "svg") == 1);
  // Every attribute's numbers are finite: nothing like "nan" or "inf" slipped into a coordinate.
  for (const char* attr :
       {" points=\"", " x=\"", " y=\"", " x1=\"", " y1=\"", " x2=\"", " y2=\"", " cx=\"", " cy=\""}) {
    for (std::size_t p = svg.find(attr); p != std::string::npos; p = svg.find(attr, p + 1)) {
      const std::size_t b = p + std::strlen(attr), e = svg.find('"', b);
      const std::string value = svg.substr(b, e - b);
      std::string number;
      for (const char c : value + " ") {
        if (c == ' ' || c == ',') {
          if (!number.empty()) {
            INFO(attr << value);
            const double v = parse_double(number);
            CHECK(std::isfinite(v));
            CHECK(std::abs(v) < 10000);
          }
          number.clear();
        } else {
          number += c;
        }
      }
    }
  }
  return seen;
}
}  // namespace

TEST_CASE("train io: SVG plot is well-formed for one epoch, many, NaN and none") {
  History many;
  for (std::uint64_t e = 1; e <= 60; ++e) {
    EpochRecord r;
    r.epoch = e;
    r.train_loss = 2.3 * std::exp(-0.1 * static_cast<double>(e));
    r.train_accuracy = 1 - 0.9 * std::exp(-0.2 * static_cast<double>(e));
    if (e % 3 == 0) r.val_loss = r.train_loss * 1.1, r.val_accuracy = r.train_accuracy - 0.01;
    many.push_back(r);
  }
  const auto seen = check_svg(flotilla::svg_plot(many, "a <title> & \"quotes\""));
  CHECK(std::count(seen.begin(), seen.end(), "polyline") == 4);
  CHECK(flotilla::svg_plot(many, "a <title> & more").find("a &lt;title&gt; &amp; more") != std::string::npos);

  History one(many.begin(), many.begin() + 1);
  const auto one_seen = check_svg(flotilla::svg_plot(one, "one"));
  CHECK(std::count(one_seen.begin(), one_seen.end(), "circle") == 2);  // a lone point still shows

  History broken(many.begin(), many.begin() + 10);
  broken[4].train_loss = std::numeric_limits<double>::quiet_NaN();
  broken[5].train_accuracy = std::numeric_limits<double>::infinity();
  for (auto& r : broken) r.val_accuracy = 0.5;  // constant
  const auto broken_seen = check_svg(flotilla::svg_plot(broken, "broken"));
  CHECK(std::count(broken_seen.begin(), broken_seen.end(), "polyline") >= 4);  // NaN splits the curve

  History nans(3);
  for (auto& r : nans) r.train_loss = r.train_accuracy = std::numeric_limits<double>::quiet_NaN();
  check_svg(flotilla::svg_plot(nans, "all NaN"));
  check_svg(flotilla::svg_plot(History{}, "empty"));

  TempDir dir;
  flotilla::write_svg_plot(dir / "p.svg", many, "run");
  CHECK(read_text(dir / "p.svg") == flotilla::svg_plot(many, "run"));
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);  // no temp file left
  const std::string e = error_of([&] { flotilla::write_svg_plot(dir / "none" / "p.svg", many, "run"); });
  CHECK(e.find((dir / "none" / "p.svg").string()) != std::string::npos);
  CHECK(e.find("No such file or directory") != std::string::npos);
}

// ---- ProgressBar --------------------------------------------------------------------------------

namespace {
struct FakeClock {
  std::chrono::steady_clock::time_point now{};
  ProgressBar::Clock fn() {
    return [this] { return now; };
  }
};
}  // namespace

TEST_CASE("train io: progress bar in lines mode writes a bounded number of lines") {
  FakeClock clock;
  std::ostringstream out;
  {
    ProgressBar bar(out, 1000, "epoch 1", ProgressBar::Style::lines, clock.fn());
    for (std::size_t s = 1; s <= 1000; ++s) {
      clock.now += std::chrono::milliseconds(10);
      bar.update(s, s * 64, 1.0 / static_cast<double>(s), 0.5);
    }
    bar.finish("val loss 0.1");
  }
  const auto lines = split_lines(out.str());
  INFO(out.str());
  CHECK(lines.size() == 10);  // 10%, ..., 90%, then finish
  CHECK(out.str().find('\r') == std::string::npos);
  CHECK(lines[0].find("epoch 1 100/1000") == 0);
  CHECK(lines[0].find("6.40k samples/s") != std::string::npos);
  CHECK(lines[0].find("ETA 0:09") != std::string::npos);
  CHECK(lines.back().find("1000/1000") != std::string::npos);
  CHECK(lines.back().find("in 0:10") != std::string::npos);
  CHECK(lines.back().find("acc 50.00%") != std::string::npos);
  CHECK(lines.back().find("val loss 0.1") != std::string::npos);

  // Steps that jump over several tenths print once; updates after finish print nothing.
  std::ostringstream jumpy;
  ProgressBar j(jumpy, 7, "", ProgressBar::Style::lines, clock.fn());
  j.update(5, 5, 1, 1);
  j.update(6, 6, 1, 1);
  j.update(7, 7, 1, 1);
  j.finish("");
  j.update(7, 7, 1, 1);
  CHECK(split_lines(jumpy.str()).size() == 3);

  // No accuracy for a model that does not classify.
  std::ostringstream regression;
  ProgressBar reg(regression, 10, "", ProgressBar::Style::lines, clock.fn());
  reg.update(10, 10, 0.5, std::numeric_limits<double>::quiet_NaN());
  reg.finish("");
  CHECK(regression.str().find("acc") == std::string::npos);
  CHECK(regression.str().find("loss") != std::string::npos);

  // A string stream is no terminal; none is silent.
  std::ostringstream quiet;
  CHECK(ProgressBar(quiet, 10, "x").style() == ProgressBar::Style::lines);
  ProgressBar none(quiet, 10, "x", ProgressBar::Style::none, clock.fn());
  none.update(10, 10, 1, 1);
  none.finish("done");
  CHECK(quiet.str().empty());
}

TEST_CASE("train io: progress bar redraws at most ten times a second") {
  FakeClock clock;
  std::ostringstream out;
  ProgressBar bar(out, 1000, "epoch 2", ProgressBar::Style::bar, clock.fn());
  for (std::size_t s = 1; s <= 1000; ++s) {
    clock.now += std::chrono::milliseconds(5);  // 5 s in all: about 50 redraws
    bar.update(s, s * 32, 0.25, 0.75);
  }
  const std::string drawn = out.str();
  const auto redraws = std::count(drawn.begin(), drawn.end(), '\r');
  CHECK(redraws >= 45);
  CHECK(redraws <= 52);
  CHECK(drawn.find('\n') == std::string::npos);
  bar.finish("done");
  CHECK(out.str().back() == '\n');
  CHECK(out.str().find("=] 1000/1000") != std::string::npos);  // a full bar
  // Not a terminal: 80 columns are assumed, every redraw fits them.
  const std::string all = out.str();
  for (std::size_t b = all.find('\r'), e; b != std::string::npos; b = e) {
    e = all.find('\r', b + 1);
    std::string line = all.substr(b + 1, e == std::string::npos ? std::string::npos : e - b - 1);
    if (e == std::string::npos) {
      CHECK(line.back() == '\n');
      line.erase(line.find_last_not_of(" \n") + 1);  // the padding that erases a longer line
      CHECK(line == "epoch 2 1000/1000  6.40k samples/s  in 0:05  loss 0.25  acc 75.00%  done");
    }
    CHECK(line.size() < 80);
  }

  // Unknown total: no bar, no ETA, still a count.
  std::ostringstream open_ended;
  ProgressBar o(open_ended, 0, "", ProgressBar::Style::bar, clock.fn());
  clock.now += std::chrono::seconds(1);
  o.update(3, 300, 1, 0);
  CHECK(open_ended.str().find("\r3  300 samples/s") == 0);
}

// ---- checkpoint format ------------------------------------------------------------------------

namespace ck = flotilla::checkpoint;

namespace {

/// CRC-32 computed bit by bit, independently of the header's table.
std::uint32_t reference_crc32(const std::vector<std::byte>& data, std::size_t begin, std::size_t end) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = begin; i < end; ++i) {
    c ^= std::to_integer<std::uint32_t>(data[i]);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

/// A checkpoint written by hand from the documented layout, so that the reader's checks of fields
/// with valid checksums (dtype, lengths, duplicate names, version) can be reached.
struct RawRecord {
  std::string name;
  std::uint32_t dtype;
  std::uint64_t count;
  std::vector<std::byte> payload;
};

template <class U>
void put(std::vector<std::byte>& out, U v) {
  for (std::size_t i = 0; i < sizeof(U); ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xFF));
}

std::vector<std::byte> raw_checkpoint(const std::vector<RawRecord>& records, std::uint32_t version = 1) {
  std::vector<std::byte> f;
  for (const char c : std::string_view("\x89"
                                       "FLTCK\r\n"))
    f.push_back(static_cast<std::byte>(c));
  put<std::uint32_t>(f, version);
  put<std::uint32_t>(f, 0);
  put<std::uint64_t>(f, records.size());
  for (const auto& r : records) {
    const std::size_t start = f.size();
    put<std::uint32_t>(f, static_cast<std::uint32_t>(r.name.size()));
    for (const char c : r.name) f.push_back(static_cast<std::byte>(c));
    put<std::uint32_t>(f, r.dtype);
    put<std::uint64_t>(f, r.count);
    put<std::uint64_t>(f, r.payload.size());
    f.insert(f.end(), r.payload.begin(), r.payload.end());
    put<std::uint32_t>(f, reference_crc32(f, start, f.size()));
  }
  put<std::uint64_t>(f, f.size() + 16);
  put<std::uint32_t>(f, reference_crc32(f, 0, f.size()));
  for (const char c : std::string_view("FEND")) f.push_back(static_cast<std::byte>(c));
  return f;
}

ck::Writer sample_writer() {
  ck::Writer w;
  w.add_array<float>("layer0.weight", std::vector<float>{1.5f, -0.0f, std::numeric_limits<float>::denorm_min(),
                                                         std::numeric_limits<float>::infinity(), 3.25f});
  w.add_array<double>("adam.m", std::vector<double>{0.1, -1e300});
  w.add_u64("epoch", 7);
  w.add_string("optimizer", "Adam");
  w.add_array<std::int32_t>("labels", std::vector<std::int32_t>{-1, 2});
  return w;
}

/// sample_writer()'s file, laid out by hand.
std::vector<std::byte> sample_by_hand() {
  std::vector<std::byte> weight, m, epoch, labels;
  for (const float v :
       {1.5f, -0.0f, std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::infinity(), 3.25f}) {
    put<std::uint32_t>(weight, std::bit_cast<std::uint32_t>(v));
  }
  for (const double v : {0.1, -1e300}) put<std::uint64_t>(m, std::bit_cast<std::uint64_t>(v));
  put<std::uint64_t>(epoch, 7);
  put<std::uint32_t>(labels, static_cast<std::uint32_t>(-1));
  put<std::uint32_t>(labels, 2);
  const std::vector<std::byte> adam = {std::byte{'A'}, std::byte{'d'}, std::byte{'a'}, std::byte{'m'}};
  return raw_checkpoint({{"layer0.weight", 6, 5, weight},
                         {"adam.m", 7, 2, m},
                         {"epoch", 5, 1, epoch},
                         {"optimizer", 2, 4, adam},
                         {"labels", 4, 2, labels}});
}

/// Bit for bit, so that NaN payloads and -0 count.
template <class T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

template <class T>
void check_round_trip(ck::Reader& r, const std::string& name, const std::vector<T>& want) {
  INFO(name);
  CHECK(r.dtype(name) == ck::detail::dtype_of<T>::value);
  CHECK(r.count(name) == want.size());
  const std::vector<T> got = r.template array<T>(name);
  REQUIRE(got.size() == want.size());
  CHECK(same_bytes(got, want));
  std::vector<T> into(want.size());
  r.array_into(name, std::span<T>(into));
  CHECK(same_bytes(into, want));
}

}  // namespace

TEST_CASE("train io: checkpoint round trip for every dtype") {
  TempDir dir;
  const std::vector<float> f32 = {0.0f,
                                  -0.0f,
                                  1.0f / 3,
                                  std::numeric_limits<float>::denorm_min(),
                                  std::numeric_limits<float>::max(),
                                  -std::numeric_limits<float>::infinity(),
                                  std::bit_cast<float>(0x7fc01234u)};  // a NaN with a payload
  const std::vector<double> f64 = {0.1, -0.0, std::numeric_limits<double>::denorm_min(),
                                   std::numeric_limits<double>::lowest(), std::bit_cast<double>(0x7ff8000000abcdefULL)};
  const std::vector<std::uint64_t> u64 = {0, 1, std::numeric_limits<std::uint64_t>::max(), 0x0102030405060708ULL};
  const std::vector<std::int32_t> i32 = {std::numeric_limits<std::int32_t>::min(), -1, 0,
                                         std::numeric_limits<std::int32_t>::max()};
  const std::vector<std::uint8_t> u8 = {0, 127, 128, 255};
  const std::vector<std::byte> raw = {std::byte{0}, std::byte{0xFF}, std::byte{0x0A}};
  const std::string text("nul\0inside ünïcode", 19);

  ck::Writer w;
  w.add_array<float>("f32", f32);
  w.add_array<double>("f64", f64);
  w.add_array<std::uint64_t>("u64", u64);
  w.add_array<std::int32_t>("i32", i32);
  w.add_array<std::uint8_t>("u8", u8);
  w.add_array<float>("empty", std::vector<float>{});
  w.add_bytes("raw", raw);
  w.add_bytes("no bytes", {});
  w.add_string("text", text);
  w.add_u64("step", 123456789012345ULL);
  CHECK_THROWS_AS(w.add_u64("f32", 1), CheckpointError);  // duplicate
  CHECK_THROWS_AS(w.add_string("", "x"), CheckpointError);
  CHECK_THROWS_AS(w.add_string(std::string(70000, 'n'), "x"), CheckpointError);
  w.commit(dir / "a.ckpt");
  CHECK(fs::file_size(dir / "a.ckpt") == w.file_size());
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);  // no temp file left

  ck::Reader r(dir / "a.ckpt");
  CHECK(r.version() == 1);
  CHECK(r.names() ==
        std::vector<std::string>{"f32", "f64", "u64", "i32", "u8", "empty", "raw", "no bytes", "text", "step"});
  check_round_trip(r, "f32", f32);
  check_round_trip(r, "f64", f64);
  check_round_trip(r, "u64", u64);
  check_round_trip(r, "i32", i32);
  check_round_trip(r, "u8", u8);
  check_round_trip(r, "empty", std::vector<float>{});
  CHECK(r.bytes("raw") == raw);
  CHECK(r.bytes("no bytes").empty());
  CHECK(r.string("text") == text);
  CHECK(r.u64("step") == 123456789012345ULL);
  CHECK(r.has("text"));
  CHECK_FALSE(r.has("tex"));

  // The bytes on disk are exactly those of Writer::bytes(), and Reader::from_bytes agrees.
  const auto bytes = w.bytes();
  const std::string on_disk = read_text(dir / "a.ckpt");
  REQUIRE(on_disk.size() == bytes.size());
  CHECK(std::memcmp(on_disk.data(), bytes.data(), bytes.size()) == 0);
  CHECK(ck::Reader::from_bytes(bytes).names() == r.names());

  // Little-endian on disk whatever the host: the u64 record's payload, found by hand.
  const std::string needle = "step";
  const std::size_t at = on_disk.find(needle) + needle.size() + 4 + 8 + 8;
  CHECK(static_cast<unsigned char>(on_disk[at]) == (123456789012345ULL & 0xFF));

  // Wrong type, wrong size, missing record: the message names the record and the file.
  const std::string file = (dir / "a.ckpt").string();
  std::string e = error_of([&] { (void)r.array<double>("f32"); });
  CHECK(e.find(file) != std::string::npos);
  CHECK(e.find("'f32' holds f32, read as f64") != std::string::npos);
  CHECK(e.find("(byte ") != std::string::npos);
  std::vector<float> small(3);
  e = error_of([&] { r.array_into("f32", std::span<float>(small)); });
  CHECK(e.find("has 7 elements, the destination holds 3") != std::string::npos);
  e = error_of([&] { (void)r.u64("missing"); });
  CHECK(e.find(file) != std::string::npos);
  CHECK(e.find("no record named 'missing'") != std::string::npos);
  CHECK_THROWS_AS((void)r.u64("u64"), CheckpointError);  // four values, not one
  CHECK_THROWS_AS((void)r.string("raw"), CheckpointError);

  // The layout in the header comment is the layout: a hand-made file reads back, and the writer's
  // bytes are the hand-made ones (so its CRCs are the standard CRC-32).
  const std::string_view check = "123456789";
  CHECK(reference_crc32(std::vector<std::byte>(reinterpret_cast<const std::byte*>(check.data()),
                                               reinterpret_cast<const std::byte*>(check.data()) + check.size()),
                        0, check.size()) == 0xCBF43926u);
  const auto hand = raw_checkpoint({{"x",
                                     6,
                                     2,
                                     {std::byte{0}, std::byte{0}, std::byte{0x80}, std::byte{0x3F}, std::byte{0},
                                      std::byte{0}, std::byte{0}, std::byte{0x40}}}});
  CHECK(ck::Reader::from_bytes(hand).array<float>("x") == std::vector<float>{1.0f, 2.0f});
  CHECK(sample_writer().bytes() == sample_by_hand());
}

TEST_CASE("train io: every damaged checkpoint is rejected") {
  const auto good = sample_writer().bytes();
  REQUIRE_NOTHROW(ck::Reader::from_bytes(good));
  const auto rejects = [](std::vector<std::byte> bytes) {
    try {
      ck::Reader::from_bytes(std::move(bytes), "damaged.ckpt");
    } catch (const CheckpointError& e) {
      return std::string(e.what()).find("damaged.ckpt (byte ") == 0;
    }
    return false;
  };

  // Every byte flipped, in every region (header, names, fields, payloads, CRCs, trailer), and a
  // single bit too.
  std::size_t failures = 0;
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (const std::byte mask : {std::byte{0xFF}, std::byte{0x01}, std::byte{0x80}}) {
      auto bad = good;
      bad[i] ^= mask;
      if (!rejects(std::move(bad))) {
        ++failures;
        FAIL_CHECK("flipping byte " << i << " was not detected");
      }
    }
  }
  CHECK(failures == 0);
  // Truncated at every length, and grown.
  for (std::size_t n = 0; n < good.size(); ++n) {
    INFO("truncated to " << n);
    CHECK(rejects(std::vector<std::byte>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n))));
  }
  auto longer = good;
  longer.push_back(std::byte{0});
  CHECK(rejects(longer));

  // What each failure says.
  const auto message = [](const std::vector<std::byte>& bytes) {
    return error_of([&] { ck::Reader::from_bytes(bytes, "c.ckpt"); });
  };
  auto bad = good;
  bad[0] = std::byte{'P'};
  CHECK(message(bad).find("c.ckpt (byte 0): not a flotilla checkpoint") == 0);
  const auto newer = raw_checkpoint({}, 3);
  CHECK(message(newer).find("c.ckpt (byte 8): checkpoint format version 3; this build of flotilla reads version 1") ==
        0);
  CHECK(message(std::vector<std::byte>(good.begin(), good.end() - 10)).find("truncated") != std::string::npos);
  bad = good;
  bad[70] ^= std::byte{1};  // in the first record's payload (which starts at 61)
  CHECK(message(bad).find("record 0 ('layer0.weight'): checksum mismatch") != std::string::npos);
  bad = good;
  bad[good.size() - 6] ^= std::byte{1};  // the file CRC
  CHECK(message(bad).find("file checksum mismatch") != std::string::npos);

  // Fields with valid checksums that still make no sense.
  const std::vector<std::byte> four(4, std::byte{1});
  CHECK(message(raw_checkpoint({{"a", 5, 1, std::vector<std::byte>(8)}, {"a", 5, 1, std::vector<std::byte>(8)}}))
            .find("record 1 ('a'): duplicate record name") != std::string::npos);
  CHECK(message(raw_checkpoint({{"a", 99, 4, four}})).find("unknown dtype 99") != std::string::npos);
  CHECK(message(raw_checkpoint({{"a", 6, 2, four}})).find("do not fill") != std::string::npos);
  CHECK(message(raw_checkpoint({{"a", 7, 0x2000000000000001ULL, std::vector<std::byte>(8)}})).find("do not fill") !=
        std::string::npos);
  CHECK(message(raw_checkpoint({{"", 1, 4, four}})).find("name length 0") != std::string::npos);
  CHECK(message(raw_checkpoint({{"a", 1, 4, four}}, 0)).find("version 0") != std::string::npos);
}

TEST_CASE("train io: a failed checkpoint commit keeps the previous file") {
  TempDir dir;
  const fs::path path = dir / "model.ckpt";
  const ck::Writer old = sample_writer();
  old.commit(path);
  const std::string before = read_text(path);
  const auto only_the_old_file = [&] {
    CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
    CHECK(read_text(path) == before);
    CHECK(ck::Reader(path).u64("epoch") == 7);
  };

  ck::Writer big;
  big.add_array<double>("w", std::vector<double>(1 << 16, 0.5));  // 512 KiB

  SUBCASE("disk full midway") {
    // A file size limit makes write(2) fail part way through, as a full disk would.
    struct rlimit saved {};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
    const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit tight = saved;
    tight.rlim_cur = 64 * 1024;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &tight) == 0);
    const std::string e = error_of([&] { big.commit(path); });
    ::setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, old_handler);
    INFO(e);
    CHECK(e.find(path.string() + " (byte 65536): cannot write " + path.string() + ".tmp-") == 0);
    CHECK(e.find("File too large") != std::string::npos);
    CHECK(e.find("previous checkpoint is unchanged") != std::string::npos);
    only_the_old_file();
  }
  SUBCASE("the directory does not exist") {
    const fs::path missing = dir / "gone" / "model.ckpt";
    const std::string e = error_of([&] { big.commit(missing); });
    CHECK(e.find(missing.string()) == 0);
    CHECK(e.find("No such file or directory") != std::string::npos);
    only_the_old_file();
  }
  SUBCASE("the rename fails") {
    fs::create_directories(dir / "occupied" / "inside");  // a non-empty directory cannot be renamed over
    const std::string e = error_of([&] { big.commit(dir / "occupied"); });
    CHECK(e.find("cannot rename") != std::string::npos);
    CHECK(fs::is_directory(dir / "occupied" / "inside"));
    fs::remove_all(dir / "occupied");
    only_the_old_file();
  }
  SUBCASE("a read-only directory") {
    if (::geteuid() != 0) {  // root writes anyway
      fs::permissions(dir.path, fs::perms::owner_read | fs::perms::owner_exec);
      const std::string e = error_of([&] { big.commit(path); });
      fs::permissions(dir.path, fs::perms::owner_all);
      CHECK(e.find("Permission denied") != std::string::npos);
      only_the_old_file();
    }
  }
  SUBCASE("success replaces it") {
    big.commit(path);
    CHECK(ck::Reader(path).array<double>("w").size() == std::size_t{1} << 16);
    CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
  }
}

}  // namespace unit_train_io
