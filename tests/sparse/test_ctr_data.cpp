// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The click-log readers: the streaming gzip decoder, the line reader, Criteo's TSV and libsvm
// lines, and what CtrReader adds over them (malformed-line policy, sharding, shuffle buffer).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "flotilla/core/crc32.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/data/criteo.hpp"
#include "flotilla/data/ctr_reader.hpp"
#include "flotilla/data/gzip.hpp"
#include "flotilla/data/gzip_stream.hpp"
#include "flotilla/data/libsvm.hpp"
#include "flotilla/data/line_reader.hpp"

namespace fs = std::filesystem;
using flotilla::ConfigError;
using flotilla::DataError;
using flotilla::Generator;
namespace data = flotilla::data;

namespace {

using Bytes = std::vector<std::uint8_t>;

// A directory of its own for each test case, removed at its end.
struct TempDir {
  fs::path path;
  TempDir() {
    static int counter = 0;
    path = fs::temp_directory_path() / ("flotilla_ctr_" + std::to_string(::getpid()) + "_" + std::to_string(++counter));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
  REQUIRE(out.good());
}

void write_bytes(const std::string& path, const Bytes& content) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(content.data()), static_cast<std::streamsize>(content.size()));
  REQUIRE(out.good());
}

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Compresses with gzip(1), a compressor independent of the decoder under test.
std::string gzip_file(const std::string& path, const std::string& level = "-6") {
  const std::string gz = path + ".gz";
  const std::string command = "gzip -c -n " + level + " '" + path + "' > '" + gz + "'";
  REQUIRE(std::system(command.c_str()) == 0);
  return gz;
}

Bytes as_bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

DataError data_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e;
  }
  FAIL("no DataError thrown");
  return DataError("", 0, "");
}

std::string hex_id(std::uint32_t v, bool upper) {
  std::string s;
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  for (int i = 7; i >= 0; --i) s += digits[(v >> (4 * i)) & 0xFU];
  return s;
}

// A Criteo line of the given columns (label, 13 dense, 26 categorical).
std::string criteo_line(const std::vector<std::string>& columns) {
  std::string s;
  for (std::size_t i = 0; i < columns.size(); ++i) s += (i ? "\t" : "") + columns[i];
  return s;
}

std::vector<std::string> good_columns() {
  std::vector<std::string> c = {"1"};
  for (int i = 0; i < 13; ++i) c.push_back(std::to_string(i * 3));
  for (int f = 0; f < 26; ++f) c.push_back(hex_id(0x1000U + static_cast<std::uint32_t>(f), false));
  return c;
}

// Random Criteo lines, some features missing, hex in both cases.
std::string random_criteo(std::size_t lines, std::uint64_t seed) {
  Generator g(seed);
  std::string s;
  for (std::size_t l = 0; l < lines; ++l) {
    std::vector<std::string> c = {std::to_string(g.below(2))};
    for (int i = 0; i < 13; ++i)
      c.push_back(g.below(5) == 0 ? "" : std::to_string(static_cast<std::int64_t>(g.below(100000)) - 3));
    for (int f = 0; f < 26; ++f)
      c.push_back(g.below(10) == 0 ? "" : hex_id(static_cast<std::uint32_t>(g()), g.below(2) == 0));
    s += criteo_line(c) + "\n";
  }
  return s;
}

bool same_example(const data::CtrExample& a, const data::CtrExample& b) {
  return a.label == b.label && a.dense == b.dense && a.offsets == b.offsets && a.ids == b.ids && a.values == b.values &&
         a.line == b.line;
}

bool same_examples(const std::vector<data::CtrExample>& a, const std::vector<data::CtrExample>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), same_example);
}

template <class Reader>
std::vector<data::CtrExample> read_all(Reader& reader) {
  std::vector<data::CtrExample> out;
  data::CtrExample e;
  while (reader.next(e)) out.push_back(e);
  return out;
}

std::vector<std::uint64_t> line_numbers(const std::vector<data::CtrExample>& examples) {
  std::vector<std::uint64_t> out;
  for (const auto& e : examples) out.push_back(e.line);
  return out;
}

data::Line line_of(const std::string& text, std::uint64_t number = 1, std::uint64_t offset = 0) {
  data::Line l;
  l.text = text;
  l.number = number;
  l.offset = offset;
  return l;
}

}  // namespace

TEST_CASE("a Criteo line gives its label, transformed dense values and one ID per present categorical field") {
  auto c = good_columns();
  c[0] = "0";
  c[1] = "";         // I1 missing
  c[2] = "-2";       // negative: log1p clamps it to 0
  c[3] = "1000000";
  c[14] = "68FD1E64";  // C1 upper case
  c[15] = "68fd1e64";  // C2 lower case: the same ID
  c[16] = "";          // C3 missing
  c[17] = "a";         // C4, one digit
  const std::string text = criteo_line(c) + "\r";  // written on Windows
  data::CtrExample e;
  data::parse_criteo_line(line_of(text, 7, 100), "day_0", data::DenseTransform::log1p, e);
  CHECK(e.label == 0.0F);
  REQUIRE(e.dense.size() == 13);
  CHECK(e.dense[0] == 0.0F);
  CHECK(e.dense[1] == 0.0F);
  CHECK(e.dense[2] == static_cast<float>(std::log(1000001.0)));
  CHECK(e.dense[3] == static_cast<float>(std::log(1.0 + 9.0)));
  CHECK(e.dense[12] == static_cast<float>(std::log(1.0 + 36.0)));
  REQUIRE(e.fields() == 26);
  CHECK(e.field_ids(0).size() == 1);
  CHECK(e.field_ids(0)[0] == 0x68fd1e64U);
  CHECK(e.field_ids(1)[0] == 0x68fd1e64U);
  CHECK(e.field_ids(2).empty());
  CHECK(e.field_ids(3)[0] == 0xaU);
  CHECK(e.field_ids(25)[0] == 0x1000U + 25U);
  CHECK(e.ids.size() == 25);
  CHECK(e.values.empty());
  CHECK(e.field_values(0).empty());

  data::parse_criteo_line(line_of(text), "day_0", data::DenseTransform::none, e);
  CHECK(e.dense[0] == 0.0F);
  CHECK(e.dense[1] == -2.0F);
  CHECK(e.dense[2] == 1000000.0F);
  CHECK(e.dense[12] == 36.0F);

  // Every field missing but the label.
  std::vector<std::string> empty(40, "");
  empty[0] = "1";
  data::parse_criteo_line(line_of(criteo_line(empty)), "day_0", data::DenseTransform::log1p, e);
  CHECK(e.label == 1.0F);
  CHECK(e.dense == std::vector<float>(13, 0.0F));
  CHECK(e.offsets == std::vector<std::uint32_t>(27, 0));
  CHECK(e.ids.empty());
}

TEST_CASE("every malformed Criteo line is a DataError naming the file, the line, the column and what was found") {
  struct Case {
    std::string name;
    std::vector<std::string> columns;  // the malformed line's columns
    std::size_t column;                // 1-based column the error must name
    std::string says;                  // part of the message
  };
  std::vector<Case> cases;
  auto c = good_columns();
  c[0] = "2";
  cases.push_back({"label 2", c, 1, "label must be 0 or 1, found \"2\""});
  c = good_columns();
  c[0] = "";
  cases.push_back({"empty label", c, 1, "label must be 0 or 1"});
  c = good_columns();
  c.pop_back();
  cases.push_back({"39 columns", c, 40, "only 39 tab-separated columns, expected 40"});
  c = good_columns();
  c.resize(5);
  cases.push_back({"5 columns", c, 6, "only 5 tab-separated columns"});
  c = good_columns();
  c.push_back("extra");
  cases.push_back({"41 columns", c, 41, "more than 40 tab-separated columns (extra column \"extra\")"});
  c = good_columns();
  c[5] = "1.5";
  cases.push_back({"fraction", c, 6, "integer feature I5 is not a 64-bit decimal integer: found \"1.5\""});
  c = good_columns();
  c[13] = "99999999999999999999";
  cases.push_back({"overflow", c, 14, "integer feature I13 is not a 64-bit decimal integer"});
  c = good_columns();
  c[2] = "-";
  cases.push_back({"lone minus", c, 3, "I2 is not a 64-bit decimal integer: found \"-\""});
  c = good_columns();
  c[14] = "123456789";
  cases.push_back({"9 hex digits", c, 15, "categorical feature C1 is longer than 8 hex digits (32 bits): found \"123456789\""});
  c = good_columns();
  c[39] = "12g4";
  cases.push_back({"not hex", c, 40, "categorical feature C26 is not hexadecimal: found \"12g4\""});
  c = good_columns();
  c[20] = std::string("\x00\xff\x1b", 3);
  cases.push_back({"binary", c, 21, "C7 is not hexadecimal: found \"\\x00\\xff\\x1b\""});
  c = good_columns();
  c[20] = "0x1f";
  cases.push_back({"0x prefix", c, 21, "C7 is not hexadecimal"});
  c = good_columns();
  c[30] = std::string(100, 'q');
  cases.push_back({"long garbage is cut", c, 31, "(100 bytes, first 40 shown)"});
  c = good_columns();
  c[8] = "12\r";
  cases.push_back({"carriage return inside", c, 9, "found \"12\\x0d\""});
  cases.push_back({"empty line", {""}, 1, "empty line (expected 40 tab-separated columns)"});

  const std::string good = criteo_line(good_columns()) + "\n";
  for (const Case& k : cases) {
    CAPTURE(k.name);
    const std::string bad = criteo_line(k.columns);
    const std::string file = good + good + bad + "\n" + good;
    const Bytes bytes = as_bytes(file);
    data::CriteoReader reader("day_1.tsv", bytes);
    data::CtrExample e;
    CHECK(reader.next(e));
    CHECK(reader.next(e));
    const DataError err = data_error([&] { reader.next(e); });
    const std::string what = err.what();
    CHECK(err.file() == "day_1.tsv");
    CHECK(what.find("line 3, column " + std::to_string(k.column) + ": ") != std::string::npos);
    CHECK(what.find(k.says) != std::string::npos);
    // The offset is the named column's first byte (or the line's end, for a missing column).
    std::size_t at = 2 * good.size();
    for (std::size_t col = 1; col < k.column && col <= k.columns.size(); ++col) at += k.columns[col - 1].size() + 1;
    if (k.column > k.columns.size()) at = 2 * good.size() + bad.size();
    CHECK(err.offset() == at);
  }
}

TEST_CASE("skipped malformed lines are counted, and one more than max_skipped is an error naming the count and the last") {
  const std::string good = criteo_line(good_columns()) + "\n";
  std::string file;
  for (int l = 1; l <= 10; ++l) file += (l == 2 || l == 5 || l == 9) ? "oops\n" : good;
  const Bytes bytes = as_bytes(file);

  data::ReaderOptions o;
  o.on_malformed = data::OnMalformed::skip;
  o.max_skipped = 3;
  data::CriteoReader reader("skip.tsv", bytes, o);
  const auto examples = read_all(reader);
  CHECK(line_numbers(examples) == std::vector<std::uint64_t>{1, 3, 4, 6, 7, 8, 10});
  CHECK(reader.skipped() == 3);
  CHECK(reader.lines() == 10);
  reader.restart(1);
  CHECK(reader.skipped() == 0);
  CHECK(read_all(reader).size() == 7);
  CHECK(reader.skipped() == 3);

  o.max_skipped = 0;
  data::CriteoReader none_allowed("skip.tsv", bytes, o);
  CHECK(std::string(data_error([&] { read_all(none_allowed); }).what())
            .find("1 malformed line skipped, more than max_skipped = 0 allows; the last: line 2, column 1") != std::string::npos);

  o.max_skipped = 2;
  data::CriteoReader strict("skip.tsv", bytes, o);
  const DataError err = data_error([&] { read_all(strict); });
  const std::string what = err.what();
  CHECK(what.find("3 malformed lines skipped, more than max_skipped = 2 allows") != std::string::npos);
  CHECK(what.find("line 9, column 1: label must be 0 or 1, found \"oops\"") != std::string::npos);
  CHECK(err.offset() == 6 * good.size() + 2 * 5);  // after lines 1-8: six good, two "oops\n"

  o.on_malformed = data::OnMalformed::fail;
  data::CriteoReader failing("skip.tsv", bytes, o);
  const DataError first = data_error([&] { read_all(failing); });
  CHECK(std::string(first.what()).find("line 2, column 1") != std::string::npos);
}

TEST_CASE("a line longer than max_line_bytes is an error, or skipped without being buffered") {
  const std::string good = criteo_line(good_columns());
  const std::string file = good + "\n" + std::string(5000, '7') + "\n" + good + "\n" + std::string(3000, 'x');
  const Bytes bytes = as_bytes(file);
  data::ReaderOptions o;
  o.max_line_bytes = good.size();
  o.chunk_bytes = 64;
  data::CriteoReader failing("long.tsv", bytes, o);
  data::CtrExample e;
  CHECK(failing.next(e));
  const DataError err = data_error([&] { failing.next(e); });
  CHECK(std::string(err.what()).find("line 2, column 1: longer than max_line_bytes = " + std::to_string(good.size())) !=
        std::string::npos);
  CHECK(err.offset() == good.size() + 1);
  CHECK(failing.buffer_bytes() == good.size() + 1 + 64);

  o.on_malformed = data::OnMalformed::skip;
  data::CriteoReader skipping("long.tsv", bytes, o);
  CHECK(line_numbers(read_all(skipping)) == std::vector<std::uint64_t>{1, 3});
  CHECK(skipping.skipped() == 2);
  CHECK(skipping.lines() == 4);
}

TEST_CASE("the line reader gives each line's number and byte offset, with or without a final newline") {
  for (const std::size_t chunk : {std::size_t{1}, std::size_t{3}, std::size_t{1} << 20}) {
    CAPTURE(chunk);
    const Bytes bytes = as_bytes("ab\n\ncde\r\nf");
    data::LineReader lines("mem", bytes, data::LineReaderOptions{chunk, 16});
    data::Line l;
    std::vector<std::string> texts;
    std::vector<std::uint64_t> numbers, offsets;
    while (lines.next(l)) {
      texts.emplace_back(l.text);
      numbers.push_back(l.number);
      offsets.push_back(l.offset);
    }
    CHECK(texts == std::vector<std::string>{"ab", "", "cde\r", "f"});
    CHECK(numbers == std::vector<std::uint64_t>{1, 2, 3, 4});
    CHECK(offsets == std::vector<std::uint64_t>{0, 3, 4, 9});
    lines.rewind();
    CHECK(lines.next(l));
    CHECK(l.text == "ab");
  }
  const Bytes ends = as_bytes("x\n");
  data::LineReader one("mem", ends);
  data::Line l;
  CHECK(one.next(l));
  CHECK_FALSE(one.next(l));
  CHECK(one.lines() == 1);
}

TEST_CASE("a gzip file read in small chunks gives the examples of the plain file, one member or several") {
  TempDir dir;
  const std::string plain = dir.file("day.tsv");
  const std::string content = random_criteo(2000, 11);
  write_file(plain, content);
  const std::string gz = gzip_file(plain);
  CHECK(data::is_gzip(read_bytes(gz)));

  const auto expected = data::read_ctr_file<data::CriteoFormat>(plain);
  REQUIRE(expected.size() == 2000);
  CHECK(same_examples(data::read_ctr_file(plain), expected));
  for (const std::size_t chunk : {std::size_t{1}, std::size_t{7}, std::size_t{4096}, std::size_t{1} << 20}) {
    CAPTURE(chunk);
    data::ReaderOptions o;
    o.chunk_bytes = chunk;
    CHECK(same_examples(data::read_ctr_file<data::CriteoFormat>(gz, o), expected));
  }

  // Three members, cut at arbitrary bytes (mid-line), and zero padding after the last.
  const std::string a = dir.file("a"), b = dir.file("b"), c = dir.file("c");
  write_file(a, content.substr(0, 1000));
  write_file(b, content.substr(1000, 150000));
  write_file(c, content.substr(151000));
  Bytes multi;
  for (const auto& part : {a, b, c}) {
    const Bytes g = read_bytes(gzip_file(part, part == b ? "-1" : "-9"));
    multi.insert(multi.end(), g.begin(), g.end());
  }
  multi.insert(multi.end(), 7, 0);
  const std::string multi_path = dir.file("multi.gz");
  write_bytes(multi_path, multi);
  data::ReaderOptions o;
  o.chunk_bytes = 333;
  CHECK(same_examples(data::read_ctr_file<data::CriteoFormat>(multi_path, o), expected));

  data::GzipStream stream(multi_path, 100);
  Bytes out(1000);
  Bytes all;
  while (const std::size_t n = stream.read(out)) all.insert(all.end(), out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n));
  CHECK(all == as_bytes(content));
  CHECK(stream.members() == 3);
  CHECK(stream.decompressed_offset() == content.size());
}

TEST_CASE("the streaming decoder gives gunzip's bytes for stored, fixed and dynamic blocks") {
  TempDir dir;
  Generator g(5);
  std::string mixed;
  for (int part = 0; part < 6; ++part) {
    for (int i = 0; i < 70000; ++i) mixed += static_cast<char>(g());                // incompressible: stored blocks
    for (int i = 0; i < 50000; ++i) mixed += "abcabcab"[g.below(8)];               // Huffman-coded
    mixed += std::string(40000, 'z');                                              // long matches
  }
  const std::string path = dir.file("mixed");
  write_file(path, mixed);
  for (const std::string level : {"-1", "-9"}) {
    const Bytes gz = read_bytes(gzip_file(path, level));
    const Bytes expected = data::gunzip(gz, "mixed.gz");
    REQUIRE(expected == as_bytes(mixed));
    for (const std::size_t chunk : {std::size_t{1}, std::size_t{300}, std::size_t{70000}}) {
      CAPTURE(chunk);
      data::GzipStream s(gz, "mixed.gz", chunk);
      const std::size_t held = s.buffer_bytes();
      Bytes all, buf(4099);
      while (const std::size_t n = s.read(buf)) all.insert(all.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
      CHECK(all == expected);
      CHECK(s.buffer_bytes() == held);
      s.rewind();
      CHECK(s.read(buf) == buf.size());
      CHECK(std::equal(buf.begin(), buf.end(), expected.begin()));
    }
  }
}

TEST_CASE("a gzip stream holds its window and one chunk, however much the file inflates to") {
  TempDir dir;
  const std::string path = dir.file("big.tsv");
  // 64 MiB of lines, compressed about 100 times: the output dwarfs every buffer.
  std::string block = random_criteo(50, 3);
  {
    std::ofstream out(path, std::ios::binary);
    std::uint64_t written = 0;
    while (written < (std::uint64_t{64} << 20)) {
      out << block;
      written += block.size();
    }
  }
  const std::uint64_t size = fs::file_size(path);
  const std::string gz = gzip_file(path, "-1");
  const std::size_t chunk = std::size_t{1} << 16;
  data::GzipStream s(gz, chunk);
  const std::size_t held = s.buffer_bytes();
  // The window, a chunk, the largest stored block and the decoder's slack: nothing scales with the file.
  CHECK(held <= data::GzipStream::window + chunk + 65535 + 2 * data::detail::Inflater::slack);
  Bytes buf(1 << 20);
  std::uint64_t total = 0;
  std::uint32_t crc = 0;
  while (const std::size_t n = s.read(buf)) {
    crc = flotilla::crc32(std::span<const std::uint8_t>(buf.data(), n), crc);
    total += n;
    CHECK(s.buffer_bytes() == held);
  }
  CHECK(total == size);
  std::uint32_t want = 0;
  for (std::uint64_t done = 0; done < size; done += block.size()) want = flotilla::crc32(std::string_view(block), want);
  CHECK(crc == want);

  data::ReaderOptions o;
  o.chunk_bytes = 4096;
  o.max_line_bytes = 1024;
  data::CriteoReader reader(gz, o);
  CHECK(reader.buffer_bytes() <= 1024 + 1 + 4096 + data::GzipStream::window + 4096 + 65535 + 2 * data::detail::Inflater::slack);
}

TEST_CASE("a truncated or corrupt gzip member is a DataError naming the file and the compressed offset") {
  TempDir dir;
  const std::string plain = dir.file("t.tsv");
  write_file(plain, random_criteo(500, 2));
  const Bytes gz = read_bytes(gzip_file(plain));
  data::ReaderOptions o;
  o.chunk_bytes = 1000;

  const std::string cut_path = dir.file("cut.gz");
  const Bytes cut(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(gz.size() / 2));
  write_bytes(cut_path, cut);
  DataError err = data_error([&] { data::read_ctr_file<data::CriteoFormat>(cut_path, o); });
  CHECK(err.file() == cut_path);
  CHECK(err.offset() == cut.size());
  CHECK(std::string(err.what()).find("truncated") != std::string::npos);

  // Cut inside the trailer: the data is complete, its CRC-32 and size are not.
  const Bytes no_trailer(gz.begin(), gz.end() - 3);
  write_bytes(cut_path, no_trailer);
  err = data_error([&] { data::read_ctr_file<data::CriteoFormat>(cut_path, o); });
  CHECK(err.offset() == no_trailer.size());
  CHECK(std::string(err.what()).find("ends before the gzip trailer") != std::string::npos);

  Bytes bad_crc = gz;
  bad_crc[gz.size() - 8] ^= 1U;
  write_bytes(cut_path, bad_crc);
  err = data_error([&] { data::read_ctr_file<data::CriteoFormat>(cut_path, o); });
  CHECK(err.offset() == gz.size() - 8);
  CHECK(std::string(err.what()).find("CRC-32 mismatch") != std::string::npos);

  Bytes garbage = gz;
  garbage.push_back('x');
  write_bytes(cut_path, garbage);
  err = data_error([&] { data::read_ctr_file<data::CriteoFormat>(cut_path, o); });
  CHECK(err.offset() == gz.size());
  CHECK(std::string(err.what()).find("trailing garbage") != std::string::npos);

  err = data_error([&] { data::CriteoReader missing(dir.file("absent.tsv")); });
  CHECK(err.file() == dir.file("absent.tsv"));
  CHECK(std::string(err.what()).find("cannot open") != std::string::npos);
}

TEST_CASE("W sharded workers together read every line exactly once, each its own residue class") {
  const Bytes bytes = as_bytes(random_criteo(1001, 9));
  for (const std::size_t workers : {std::size_t{1}, std::size_t{3}, std::size_t{8}}) {
    for (const std::size_t shuffle : {std::size_t{0}, std::size_t{50}}) {
      CAPTURE(workers);
      CAPTURE(shuffle);
      std::vector<std::uint64_t> all;
      for (std::size_t w = 0; w < workers; ++w) {
        data::ReaderOptions o;
        o.worker = w;
        o.workers = workers;
        o.shuffle_buffer = shuffle;
        data::CriteoReader reader("shard.tsv", bytes, o);
        for (const auto l : line_numbers(read_all(reader))) {
          CHECK((l - 1) % workers == w);
          all.push_back(l);
        }
        CHECK(reader.lines() == 1001);
      }
      std::sort(all.begin(), all.end());
      std::vector<std::uint64_t> every(1001);
      std::iota(every.begin(), every.end(), 1);
      CHECK(all == every);
    }
  }
  data::ReaderOptions o;
  o.workers = 0;
  CHECK_THROWS_AS(data::CriteoReader("shard.tsv", bytes, o), ConfigError);
  o.workers = 2;
  o.worker = 2;
  CHECK_THROWS_AS(data::CriteoReader("shard.tsv", bytes, o), ConfigError);
  o.worker = 1;
  o.chunk_bytes = 0;
  CHECK_THROWS_AS(data::CriteoReader("shard.tsv", bytes, o), ConfigError);
  o.chunk_bytes = 1;
  o.max_line_bytes = 0;
  CHECK_THROWS_AS(data::CriteoReader("shard.tsv", bytes, o), ConfigError);
  o.max_line_bytes = 1;
  data::CriteoReader tiny("shard.tsv", bytes, o);
  data::CtrExample e;
  CHECK_THROWS_AS(tiny.next(e), DataError);  // every line is longer than one byte
}

TEST_CASE("a shuffle buffer hands out a permutation of the shard that depends on the seed and the epoch") {
  const Bytes bytes = as_bytes(random_criteo(500, 4));
  data::ReaderOptions o;
  const auto in_order = [&] {
    data::CriteoReader r("s.tsv", bytes, o);
    return read_all(r);
  }();
  o.shuffle_buffer = 64;
  o.seed = 17;
  data::CriteoReader reader("s.tsv", bytes, o);
  const auto epoch0 = read_all(reader);
  auto sorted = line_numbers(epoch0);
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == line_numbers(in_order));
  CHECK(line_numbers(epoch0) != line_numbers(in_order));
  // Each example is the one its line holds.
  for (const auto& e : epoch0) CHECK(same_example(e, in_order[e.line - 1]));
  // A buffer of 64 moves nothing earlier than 63 places before its place in the file.
  for (std::size_t i = 0; i < epoch0.size(); ++i) CHECK(epoch0[i].line <= i + 64);

  reader.restart(1);
  const auto epoch1 = line_numbers(read_all(reader));
  CHECK(epoch1 != line_numbers(epoch0));
  reader.restart(0);
  CHECK(line_numbers(read_all(reader)) == line_numbers(epoch0));
  data::CriteoReader again("s.tsv", bytes, o);
  CHECK(line_numbers(read_all(again)) == line_numbers(epoch0));
  o.seed = 18;
  data::CriteoReader other("s.tsv", bytes, o);
  CHECK(line_numbers(read_all(other)) != line_numbers(epoch0));
  // A buffer larger than the file shuffles the whole file.
  o.shuffle_buffer = 10000;
  data::CriteoReader whole("s.tsv", bytes, o);
  CHECK(read_all(whole).size() == 500);
}

TEST_CASE("libsvm lines give one field of indices weighted by their values") {
  data::CtrExample e;
  CHECK(data::parse_libsvm_line(line_of("1 qid:3 5:0.5 12:-2\t7:1e2 # a comment"), "a.svm", e));
  CHECK(e.label == 1.0F);
  CHECK(e.dense.empty());
  REQUIRE(e.fields() == 1);
  CHECK(e.ids == std::vector<std::uint64_t>{5, 12, 7});
  CHECK(e.values == std::vector<float>{0.5F, -2.0F, 100.0F});
  CHECK(e.field_values(0).size() == 3);
  CHECK(data::parse_libsvm_line(line_of("-1 3:1\r"), "a.svm", e));
  CHECK(e.label == 0.0F);
  CHECK(e.ids == std::vector<std::uint64_t>{3});
  CHECK(data::parse_libsvm_line(line_of("+1"), "a.svm", e));
  CHECK(e.label == 1.0F);
  CHECK(e.ids.empty());
  CHECK(e.offsets == std::vector<std::uint32_t>{0, 0});
  CHECK(data::parse_libsvm_line(line_of("0.0 18446744073709551615:3"), "a.svm", e));
  CHECK(e.label == 0.0F);
  CHECK(e.ids == std::vector<std::uint64_t>{18446744073709551615ULL});
  CHECK_FALSE(data::parse_libsvm_line(line_of("   # only a comment"), "a.svm", e));
  CHECK_FALSE(data::parse_libsvm_line(line_of(""), "a.svm", e));

  struct Case {
    std::string text;
    std::size_t column;
    std::size_t offset;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"2 1:1", 1, 0, "label must be 0, 1, -1 or +1, found \"2\""},
      {"yes 1:1", 1, 0, "label must be 0, 1, -1 or +1"},
      {"1 1:1 abc", 3, 6, "expected index:value, found \"abc\""},
      {"1 x:1", 2, 2, "feature index is not an unsigned 64-bit integer: found \"x:1\""},
      {"1 -4:1", 2, 2, "feature index is not an unsigned 64-bit integer"},
      {"1 18446744073709551616:1", 2, 2, "feature index is not an unsigned 64-bit integer"},
      {"1  4:", 2, 3, "feature value is not a finite single-precision number: found \"4:\""},
      {"1 4:inf", 2, 2, "feature value is not a finite"},
      {"1 4:1e39", 2, 2, "feature value is not a finite single-precision"},
      {"1 4:nan", 2, 2, "feature value is not a finite"},
      {"1 4:1 qid:2", 3, 6, "qid must come right after the label"},
      {"1 qid:x 4:1", 2, 2, "qid is not an unsigned integer"},
      {"1 4:1\r\r", 2, 2, "feature value is not a finite single-precision number: found \"4:1\\x0d\""},
      {std::string("1 \x01\x02:1", 6), 2, 2, "feature index is not an unsigned 64-bit integer: found \"\\x01\\x02:1\""},
  };
  for (const Case& k : cases) {
    CAPTURE(k.text);
    const DataError err = data_error([&] { data::parse_libsvm_line(line_of(k.text, 12, 1000), "b.svm", e); });
    CHECK(err.file() == "b.svm");
    CHECK(err.offset() == 1000 + k.offset);
    CHECK(std::string(err.what()).find("line 12, column " + std::to_string(k.column) + ": " + k.says) != std::string::npos);
  }
}

TEST_CASE("a libsvm reader passes over comment lines, keeps line numbers, and reads gzip like plain text") {
  TempDir dir;
  const std::string path = dir.file("train.svm");
  write_file(path, "# written by hand\n1 1:0.5 3:1\n\n-1 2:2\nbad\n0 9:1 # last\n");
  data::ReaderOptions o;
  const DataError err = data_error([&] { data::read_ctr_file<data::LibsvmFormat>(path, o); });
  CHECK(std::string(err.what()).find("line 5, column 1") != std::string::npos);
  o.on_malformed = data::OnMalformed::skip;
  data::LibsvmReader reader(path, o);
  const auto examples = read_all(reader);
  CHECK(line_numbers(examples) == std::vector<std::uint64_t>{2, 4, 6});
  CHECK(reader.skipped() == 1);
  REQUIRE(examples.size() == 3);
  CHECK(examples[1].label == 0.0F);
  CHECK(examples[1].ids == std::vector<std::uint64_t>{2});
  CHECK(examples[1].values == std::vector<float>{2.0F});
  const std::string gz = gzip_file(path);
  CHECK(same_examples(data::read_ctr_file<data::LibsvmFormat>(gz, o), examples));
}
