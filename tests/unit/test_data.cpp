// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The data module: CRC-32, gunzip / inflate, IDX files, Dataset, Loader, Fashion-MNIST.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numbers>
#include <numeric>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <sys/resource.h>

#include "flotilla/core/crc32.hpp"
#include "flotilla/core/crc32c.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/data/dataset.hpp"
#include "flotilla/data/fashion_mnist.hpp"
#include "flotilla/data/gzip.hpp"
#include "flotilla/data/idx.hpp"
#include "flotilla/data/loader.hpp"

namespace unit_data {

using namespace flotilla;
namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

namespace {

// ---- fixtures --------------------------------------------------------------------------------

// tests/data/gzip, written by tests/data/gzip/make_fixtures.py with Python's zlib.
const fs::path fixture_dir = fs::path(__FILE__).parent_path().parent_path() / "data" / "gzip";

Bytes fixture(const char* name) { return data::read_file(fixture_dir / name); }

// Mirrors payload() in make_fixtures.py: the uncompressed content of the fixtures.
Bytes fixture_payload(std::size_t n) {
  static const std::array<std::string_view, 8> words = {"flotilla ", "gradient ", "tensor ", "batch ",
                                                        "epoch ",    "shard ",    "loss ",   "adam "};
  std::uint32_t x = 0x12345678;
  Bytes out;
  const auto add = [&](std::string_view w) { out.insert(out.end(), w.begin(), w.end()); };
  while (out.size() < n) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    const std::uint32_t r = x % 16;
    if (r < 9) {
      add(words[(x >> 4) & 7]);
    } else if (r < 12) {
      out.push_back(static_cast<std::uint8_t>((x >> 8) & 0xFF));
    } else if (r < 14) {
      out.insert(out.end(), ((x >> 8) & 63) + 1, static_cast<std::uint8_t>((x >> 16) & 0xFF));
    } else if (out.size() > 33000) {
      const std::size_t start = out.size() - 32000 - ((x >> 8) & 511);
      const std::size_t len = 40 + ((x >> 20) & 127);
      for (std::size_t k = 0; k < len; ++k) out.push_back(out[start + k]);
    } else {
      add(words[(x >> 7) & 7]);
      add(words[(x >> 10) & 7]);
    }
  }
  out.resize(n);
  return out;
}

Bytes concat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
Bytes bytes_of(std::string_view s) { return Bytes(s.begin(), s.end()); }

// Runs f, which must throw DataError; returns it for further checks.
template <class F>
DataError data_error(F&& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e;
  }
  FAIL("expected a DataError");
  return DataError("", 0, "");
}

#define CHECK_DATA_ERROR(expr, substring)                 \
  do {                                                    \
    const DataError e_ = data_error([&] { (void)(expr); }); \
    INFO(std::string(e_.what()));                         \
    CHECK(std::string(e_.what()).find(substring) != std::string::npos); \
  } while (0)

// A gzip member of stored blocks, for wrapping test data without a compressor.
Bytes gzip_stored(std::span<const std::uint8_t> payload) {
  Bytes out = {0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 0xFF};
  std::size_t pos = 0;
  do {
    const std::size_t len = std::min<std::size_t>(payload.size() - pos, 65535);
    const bool last = pos + len == payload.size();
    out.push_back(last ? 1 : 0);
    out.push_back(static_cast<std::uint8_t>(len));
    out.push_back(static_cast<std::uint8_t>(len >> 8));
    out.push_back(static_cast<std::uint8_t>(~len));
    out.push_back(static_cast<std::uint8_t>(~len >> 8));
    out.insert(out.end(), payload.begin() + static_cast<std::ptrdiff_t>(pos), payload.begin() + static_cast<std::ptrdiff_t>(pos + len));
    pos += len;
  } while (pos < payload.size());
  const std::uint32_t crc = crc32(payload);
  const auto size = static_cast<std::uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(crc >> (8 * i)));
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(size >> (8 * i)));
  return out;
}

// Writes DEFLATE bit streams by hand, for malformed streams no compressor produces.
struct BitWriter {
  Bytes out;
  unsigned used = 0;  // bits used in out.back()
  void bit(unsigned b) {
    if (used == 0) out.push_back(0);
    out.back() = static_cast<std::uint8_t>(out.back() | (b & 1U) << used);
    used = (used + 1) & 7U;
  }
  void bits(std::uint32_t v, unsigned n) {  // least significant bit first: header fields, extra bits
    for (unsigned i = 0; i < n; ++i) bit(v >> i);
  }
  void code(std::uint32_t c, unsigned n) {  // most significant bit first: Huffman codes
    for (unsigned i = n; i-- > 0;) bit(c >> i);
  }
  void align() { used = 0; }
};

void fixed_symbol(BitWriter& w, unsigned s) {
  if (s < 144) w.code(0x30 + s, 8);
  else if (s < 256) w.code(0x190 + s - 144, 9);
  else if (s < 280) w.code(s - 256, 7);
  else w.code(0xC0 + s - 280, 8);
}
void fixed_match(BitWriter& w, unsigned length, unsigned distance) {
  unsigned i = 28;
  while (data::detail::length_base[i] > length) --i;
  fixed_symbol(w, 257 + i);
  w.bits(length - data::detail::length_base[i], data::detail::length_extra[i]);
  unsigned d = 29;
  while (data::detail::distance_base[d] > distance) --d;
  w.code(d, 5);
  w.bits(distance - data::detail::distance_base[d], data::detail::distance_extra[d]);
}

std::vector<std::uint32_t> canonical_codes(const std::vector<std::uint8_t>& lens) {
  std::array<std::uint32_t, 17> count{}, next{};
  for (auto l : lens) ++count[l];
  count[0] = 0;
  for (unsigned l = 1; l <= 16; ++l) next[l] = (next[l - 1] + count[l - 1]) << 1;
  std::vector<std::uint32_t> codes(lens.size());
  for (std::size_t s = 0; s < lens.size(); ++s)
    if (lens[s]) codes[s] = next[lens[s]]++;
  return codes;
}

struct ClSymbol {
  unsigned sym;
  unsigned extra = 0;
};
std::vector<ClSymbol> plain_lengths(const std::vector<std::uint8_t>& lens) {
  std::vector<ClSymbol> out;
  for (auto l : lens) out.push_back({l});
  return out;
}
// A complete code-length code: symbols 0-12 get 4 bits, 13-18 get 5.
std::vector<std::uint8_t> default_cl_lengths() {
  std::vector<std::uint8_t> l(19, 4);
  std::fill(l.begin() + 13, l.end(), std::uint8_t{5});
  return l;
}

// A dynamic block header: counts, code-length code, then the code-length symbols.
void dynamic_header(BitWriter& w, unsigned hlit, unsigned hdist, const std::vector<std::uint8_t>& cl_lens,
                    const std::vector<ClSymbol>& symbols) {
  w.bits(1, 1);
  w.bits(2, 2);
  w.bits(hlit - 257, 5);
  w.bits(hdist - 1, 5);
  w.bits(15, 4);
  for (unsigned i = 0; i < 19; ++i) w.bits(cl_lens[data::detail::code_length_order[i]], 3);
  const auto codes = canonical_codes(cl_lens);
  for (const auto& s : symbols) {
    w.code(codes[s.sym], cl_lens[s.sym]);
    if (s.sym == 16) w.bits(s.extra, 2);
    if (s.sym == 17) w.bits(s.extra, 3);
    if (s.sym == 18) w.bits(s.extra, 7);
  }
}
// A whole dynamic block header from literal/length and distance code lengths.
void dynamic_header(BitWriter& w, const std::vector<std::uint8_t>& lit, const std::vector<std::uint8_t>& dist) {
  std::vector<std::uint8_t> all = lit;
  all.insert(all.end(), dist.begin(), dist.end());
  dynamic_header(w, static_cast<unsigned>(lit.size()), static_cast<unsigned>(dist.size()), default_cl_lengths(), plain_lengths(all));
}

Bytes inflate(const Bytes& raw, std::size_t max_output = data::default_max_output) {
  return data::inflate_raw(raw, "crafted", max_output);
}

// ---- temporary files -------------------------------------------------------------------------

struct TempDir {
  fs::path path;
  TempDir() {
    const auto t = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    path = fs::temp_directory_path() / ("flotilla-test-data-" + std::to_string(detail::mix(t, reinterpret_cast<std::uintptr_t>(this))));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  fs::path write(const std::string& name, const Bytes& content) const {
    const fs::path p = path / name;
    std::ofstream f(p, std::ios::binary);
    f.write(reinterpret_cast<const char*>(content.data()), static_cast<std::streamsize>(content.size()));
    return p;
  }
};

void put_be32(Bytes& b, std::uint32_t v) {
  for (int i = 3; i >= 0; --i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
Bytes idx_bytes(std::uint8_t type, const std::vector<std::uint32_t>& dims, const Bytes& values) {
  Bytes b = {0, 0, type, static_cast<std::uint8_t>(dims.size())};
  for (auto d : dims) put_be32(b, d);
  b.insert(b.end(), values.begin(), values.end());
  return b;
}
Bytes iota_bytes(std::size_t n, std::uint8_t start = 0) {
  Bytes b(n);
  std::iota(b.begin(), b.end(), start);
  return b;
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

// A valid gzip file whose content is `head` followed by `zeros` zero bytes, written as fixed-code
// DEFLATE (the zeros as 258-byte matches, 13 bits each): 256 MiB of zeros fit in 1.6 MB.
Bytes gzip_bomb(const Bytes& head, std::size_t zeros) {
  BitWriter w;
  w.out = {0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 0xFF};
  w.bits(1, 1);
  w.bits(1, 2);
  for (const std::uint8_t b : head) fixed_symbol(w, b);
  std::size_t left = zeros;
  if (left > 0) {
    fixed_symbol(w, 0);
    --left;
  }
  for (; left >= 258; left -= 258) fixed_match(w, 258, 1);
  for (; left > 0; --left) fixed_symbol(w, 0);
  fixed_symbol(w, 256);
  std::uint32_t crc = crc32(head);
  const Bytes block(std::size_t{1} << 20, 0);
  for (std::size_t done = 0; done < zeros; done += block.size())
    crc = crc32(std::span<const std::uint8_t>(block).first(std::min(block.size(), zeros - done)), crc);
  const auto size = static_cast<std::uint32_t>(head.size() + zeros);
  for (int i = 0; i < 4; ++i) w.out.push_back(static_cast<std::uint8_t>(crc >> (8 * i)));
  for (int i = 0; i < 4; ++i) w.out.push_back(static_cast<std::uint8_t>(size >> (8 * i)));
  return w.out;
}

// The process's peak resident memory so far, in bytes.
std::size_t peak_rss() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::size_t>(usage.ru_maxrss) * 1024;
}

}  // namespace

// ================================================================================================
TEST_CASE("crc32: known vectors, incremental use, both byte types") {
  static_assert(crc32(std::string_view("123456789")) == 0xCBF43926U, "crc32 must be usable at compile time");
  CHECK(crc32(std::string_view("123456789")) == 0xCBF43926U);
  CHECK(crc32(std::string_view("")) == 0U);
  CHECK(crc32(std::string_view("a")) == 0xE8B7BE43U);
  CHECK(crc32(std::string_view("The quick brown fox jumps over the lazy dog")) == 0x414FA339U);

  // Against a bit-at-a-time reference, for every length up to 70 at every alignment up to 8.
  const auto reference = [](std::span<const std::uint8_t> d) {
    std::uint32_t c = 0xFFFFFFFFU;
    for (auto byte : d) {
      c ^= byte;
      for (int k = 0; k < 8; ++k) c = (c & 1U) ? (c >> 1) ^ 0xEDB88320U : c >> 1;
    }
    return ~c;
  };
  Generator g(7);
  Bytes buf(80);
  for (auto& b : buf) b = static_cast<std::uint8_t>(g());
  for (std::size_t off = 0; off < 8; ++off)
    for (std::size_t len = 0; off + len <= 78; ++len) {
      const auto s = std::span<const std::uint8_t>(buf).subspan(off, len);
      REQUIRE(crc32(s) == reference(s));
    }
  // Split anywhere, continued from the first part's CRC: the CRC of the whole.
  const std::uint32_t whole = crc32(buf);
  for (std::size_t cut = 0; cut <= buf.size(); ++cut) {
    const auto s = std::span<const std::uint8_t>(buf);
    REQUIRE(crc32(s.subspan(cut), crc32(s.first(cut))) == whole);
  }
  Crc32 running;
  running.update(std::span<const std::uint8_t>(buf).first(13)).update(std::as_bytes(std::span<const std::uint8_t>(buf).subspan(13)));
  CHECK(running.value() == whole);
  CHECK(crc32(std::as_bytes(std::span<const std::uint8_t>(buf))) == whole);
}

// ================================================================================================
TEST_CASE("crc32c: the Castagnoli CRC, in hardware and by table, incremental, at every length and alignment") {
  const std::string_view check = "123456789";
  CHECK(crc32c(std::as_bytes(std::span<const char>(check.data(), check.size()))) == 0xE3069283U);  // the catalogue's check value
  CHECK(crc32c_portable(std::as_bytes(std::span<const char>(check.data(), check.size()))) == 0xE3069283U);
  CHECK(crc32c(std::span<const std::byte>()) == 0U);
  // Against a bit-at-a-time reference, for every length up to 70 at every alignment up to 8.
  const auto reference = [](std::span<const std::byte> d) {
    std::uint32_t c = 0xFFFFFFFFU;
    for (auto byte : d) {
      c ^= std::to_integer<std::uint32_t>(byte);
      for (int k = 0; k < 8; ++k) c = (c & 1U) ? (c >> 1) ^ 0x82F63B78U : c >> 1;
    }
    return ~c;
  };
  Generator g(11);
  std::vector<std::byte> buf(3 * 3 * 4096 + 77);  // past two of the hardware path's three-lane blocks
  for (auto& b : buf) b = static_cast<std::byte>(g());
  const auto all = std::span<const std::byte>(buf);
  for (std::size_t off = 0; off < 8; ++off)
    for (std::size_t len = 0; len <= 70; ++len) REQUIRE(crc32c(all.subspan(off, len)) == reference(all.subspan(off, len)));
  // Long buffers, which take the three lanes, agree with the reference and with the table.
  for (const std::size_t len : {std::size_t{3 * 4096 - 1}, std::size_t{3 * 4096}, std::size_t{3 * 4096 + 9}, buf.size() - 3}) {
    CAPTURE(len);
    CHECK(crc32c(all.subspan(3, len)) == reference(all.subspan(3, len)));
    CHECK(crc32c_portable(all.subspan(3, len)) == reference(all.subspan(3, len)));
  }
  // Split anywhere, continued from the first part's CRC: the CRC of the whole.
  const std::uint32_t whole = crc32c(all);
  for (std::size_t cut = 0; cut <= buf.size(); cut += 997) REQUIRE(crc32c(all.subspan(cut), crc32c(all.first(cut))) == whole);
}

// ================================================================================================
TEST_CASE("random: a seed draws the same bits on every platform; the logarithm and cosine are accurate") {
  // The contract: these bits, whatever the compiler, flags (-march, FMA or not) and maths library.
  // (std::log and std::cos differ in the last bit between libraries; std::fma and IEEE
  // arithmetic do not.)
  const std::uint64_t normals[] = {0xbfd368a97c38507dULL, 0x3ff58040c37f1763ULL, 0x3fd88aa35330a929ULL,
                                   0x3fedfb989fa22578ULL, 0xbff77492ea9c737bULL, 0xbfd881ecd3b33a65ULL};
  Generator g(42);
  for (const auto expected : normals) {
    const double z = g.normal();
    std::uint64_t bits = 0;
    std::memcpy(&bits, &z, sizeof bits);
    CHECK(bits == expected);
  }
  const std::uint32_t uniforms[] = {0xbe94a7c9U, 0x3ee5183dU, 0x3f999d28U};  // uniform(-0.5f, 2.0f)
  Generator f(42);
  for (const auto expected : uniforms) {
    const float v = f.uniform(-0.5f, 2.0f);
    std::uint32_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    CHECK(bits == expected);
  }
  // Within 2 units in the last place of the maths library's logarithm, and 1e-15 of its cosine,
  // over the whole range Box-Muller uses.
  CHECK(detail::portable_log(1.0) == 0.0);
  CHECK(detail::portable_cos_turns(0.0) == 1.0);
  CHECK(detail::portable_cos_turns(0.5) == -1.0);
  Generator r(3);
  double worst_log = 0, worst_cos = 0;
  for (int i = 0; i < 200000; ++i) {
    const double u = i < 60 ? std::ldexp(1.0, -i) : 1.0 - r.uniform<double>();
    const double want = std::log(u);
    worst_log = std::max(worst_log, std::abs(detail::portable_log(u) - want) / std::abs(std::nextafter(want, 0.0) - want + (want == 0)));
    const double v = r.uniform<double>();
    worst_cos = std::max(worst_cos, std::abs(detail::portable_cos_turns(v) - std::cos(2 * std::numbers::pi * v)));
  }
  CHECK(worst_log <= 2.0);
  CHECK(worst_cos < 1e-15);
  // And a standard normal: mean 0 and variance 1 within 4 standard errors over 10^6 draws.
  Generator n(9);
  double sum = 0, squares = 0;
  for (int i = 0; i < 1000000; ++i) {
    const double z = n.normal();
    sum += z;
    squares += z * z;
  }
  CHECK(std::abs(sum / 1e6) < 4e-3);
  CHECK(std::abs(squares / 1e6 - 1) < 4 * std::sqrt(2.0 / 1e6));
}

// ================================================================================================
TEST_CASE("gunzip: data compressed by Python's gzip and zlib") {
  const Bytes p = fixture_payload(36000);
  for (const char* name : {"level0.gz", "level1.gz", "level6.gz", "level9.gz"}) {
    INFO(std::string(name));
    CHECK(data::gunzip(fixture(name), name) == p);
  }
  CHECK(data::gunzip(fixture("fname.gz"), "fname.gz") == fixture_payload(6000));
  // FTEXT, FHCRC, FEXTRA, FNAME, FCOMMENT, and sync / full flushes (empty stored blocks).
  CHECK(data::gunzip(fixture("flags.gz"), "flags.gz") == fixture_payload(8000));
  // Four members: level 9, empty, a fixed-Huffman one, level 1.
  const Bytes multi_expected =
      concat({Bytes(p.begin(), p.begin() + 3000), bytes_of("hello, fixed Huffman codes"), Bytes(p.begin() + 3000, p.begin() + 9000)});
  CHECK(data::gunzip(fixture("multi.gz"), "multi.gz") == multi_expected);

  // Raw DEFLATE: forced fixed codes, run-length matches only, literals only; and a gzip body.
  CHECK(data::inflate_raw(fixture("fixed.deflate"), "fixed.deflate") == fixture_payload(6000));
  CHECK(data::inflate_raw(fixture("rle.deflate"), "rle.deflate") == fixture_payload(6000));
  CHECK(data::inflate_raw(fixture("huffman_only.deflate"), "huffman_only.deflate") == fixture_payload(3000));
  const Bytes gz = fixture("level6.gz");
  CHECK(data::inflate_raw(std::span<const std::uint8_t>(gz).subspan(10, gz.size() - 18), "body") == p);

  CHECK(data::is_gzip(gz));
  CHECK_FALSE(data::is_gzip(fixture("fixed.deflate")));
  // Our own stored-block writer, across the 65535-byte block limit, and an empty payload.
  Bytes big = iota_bytes(150000);
  CHECK(data::gunzip(gzip_stored(big), "stored") == big);
  CHECK(data::gunzip(gzip_stored(Bytes{}), "empty").empty());
}

TEST_CASE("gunzip: container errors name the file and the byte") {
  const Bytes gz = fixture("level6.gz");
  const std::string name = "level6.gz";

  Bytes bad = gz;
  bad[0] = 0x1E;
  CHECK_DATA_ERROR(data::gunzip(bad, name), "not gzip");
  bad = gz;
  bad[2] = 7;
  {
    const DataError e = data_error([&] { data::gunzip(bad, name); });
    CHECK(e.file() == name);
    CHECK(e.offset() == 2);
    CHECK(contains(e.what(), "compression method 7"));
  }
  bad = gz;
  bad[3] = 0x80;
  CHECK_DATA_ERROR(data::gunzip(bad, name), "reserved flag");

  // Trailer: CRC and size.
  bad = gz;
  bad[gz.size() - 6] ^= 0x01;
  {
    const DataError e = data_error([&] { data::gunzip(bad, name); });
    CHECK(e.offset() == gz.size() - 8);
    CHECK(contains(e.what(), "CRC-32 mismatch"));
  }
  bad = gz;
  bad[gz.size() - 2] ^= 0x01;
  CHECK_DATA_ERROR(data::gunzip(bad, name), "size mismatch");

  // Header CRC (FHCRC): flags.gz's two bytes before the DEFLATE data.
  const Bytes flags = fixture("flags.gz");
  const std::size_t hcrc = 10 + 2 + 7 + 12 + 10;  // fixed part, XLEN, extra, name, comment
  bad = flags;
  bad[hcrc] ^= 0x40;
  {
    const DataError e = data_error([&] { data::gunzip(bad, "flags.gz"); });
    CHECK(e.offset() == hcrc);
    CHECK(contains(e.what(), "header CRC"));
  }

  // After the last member: zero padding is accepted (as gzip(1) does), anything else is not.
  CHECK(data::gunzip(concat({gz, Bytes(5, 0)}), name) == fixture_payload(36000));
  {
    const DataError e = data_error([&] { data::gunzip(concat({gz, bytes_of("x")}), name); });
    CHECK(e.offset() == gz.size());
    CHECK(contains(e.what(), "trailing garbage"));
  }
  CHECK_DATA_ERROR(data::gunzip(concat({gz, Bytes{0, 0, 7}}), name), "trailing garbage");
  CHECK_DATA_ERROR(data::gunzip(concat({gz, Bytes{0x1F, 0x8B, 8}}), name), "truncated");
  CHECK_DATA_ERROR(data::inflate_raw(concat({fixture("fixed.deflate"), Bytes{0}}), "raw"), "trailing data");
  CHECK_DATA_ERROR(data::gunzip(Bytes{}, name), "truncated");
}

TEST_CASE("gunzip: every truncation is a DataError at the end of the data") {
  for (const char* name : {"level6.gz", "flags.gz", "multi.gz", "level0.gz"}) {
    const Bytes gz = fixture(name);
    const Bytes whole = data::gunzip(gz, name);
    std::size_t complete = 0;
    const std::size_t step = gz.size() < 4000 ? 1 : gz.size() < 10000 ? 7 : 37;
    for (std::size_t len = 0; len < gz.size(); len += (len < 64 || len + 64 > gz.size()) ? 1 : step) {
      std::string what;
      std::uint64_t offset = 0;
      Bytes out;
      try {
        out = data::gunzip(std::span<const std::uint8_t>(gz).first(len), name);
      } catch (const DataError& e) {
        what = e.what();
        offset = e.offset();
      }
      INFO(std::string(name) << " cut at " << len << ": " << what);
      if (what.empty()) {
        // A cut between two members of multi.gz leaves a valid file of fewer members.
        REQUIRE(std::equal(out.begin(), out.end(), whole.begin()));
        ++complete;
      } else {
        REQUIRE(contains(what, "truncated"));
        REQUIRE(offset == len);
      }
    }
    CHECK(complete == (std::string_view(name) == "multi.gz" ? 3 : 0));
  }
}

TEST_CASE("gunzip: corrupted streams fail cleanly or decode exactly") {
  const Bytes p = fixture_payload(36000);
  std::size_t failed = 0, tried = 0;
  for (const char* name : {"level6.gz", "level1.gz", "multi.gz", "flags.gz"}) {
    const Bytes gz = fixture(name);
    const Bytes good = data::gunzip(gz, name);
    for (std::size_t pos = 0; pos < gz.size(); pos += (gz.size() > 2000 ? 11 : 1)) {
      Bytes bad = gz;
      bad[pos] ^= static_cast<std::uint8_t>(1U << (pos % 8));
      ++tried;
      Bytes out;
      bool threw = false;
      try {
        out = data::gunzip(bad, name);
      } catch (const DataError& e) {
        threw = true;
        REQUIRE(e.file() == name);
        REQUIRE(e.offset() <= gz.size());
      }
      // A flip in MTIME, XFL, OS or FTEXT changes nothing that is checked.
      if (!threw) REQUIRE(out == good);
      failed += threw ? 1 : 0;
    }
  }
  CHECK(failed > tried * 9 / 10);

  // Random garbage after a valid header, and random multi-byte damage.
  Generator g(42);
  const Bytes level9 = fixture("level9.gz");
  for (int round = 0; round < 1200; ++round) {
    Bytes bad;
    if (round % 2 == 0) {
      bad = {0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 3};
      const std::size_t len = g.below(300);
      for (std::size_t i = 0; i < len; ++i) bad.push_back(static_cast<std::uint8_t>(g()));
    } else {
      bad = level9;
      for (int k = 0; k < 4; ++k) bad[10 + g.below(bad.size() - 10)] = static_cast<std::uint8_t>(g());
    }
    try {
      const Bytes out = data::gunzip(bad, "fuzz", 1 << 20);
      CHECK(out.size() <= (1U << 20));
    } catch (const DataError&) {
    }
  }
}

TEST_CASE("inflate: malformed DEFLATE streams") {
  SUBCASE("reserved block type") {
    BitWriter w;
    w.bits(1, 1);
    w.bits(3, 2);
    CHECK_DATA_ERROR(inflate(w.out), "block type 3");
  }
  SUBCASE("stored block length and complement disagree") {
    BitWriter w;
    w.bits(1, 1);
    w.bits(0, 2);
    w.align();
    w.out.insert(w.out.end(), {5, 0, 0, 0, 'a', 'b', 'c', 'd', 'e'});
    CHECK_DATA_ERROR(inflate(w.out), "does not match its complement");
  }
  SUBCASE("distance too far back") {
    BitWriter w;
    w.bits(1, 1);
    w.bits(1, 2);
    fixed_symbol(w, 'a');
    fixed_match(w, 3, 2);
    fixed_symbol(w, 256);
    const DataError e = data_error([&] { inflate(w.out); });
    CHECK(contains(e.what(), "invalid distance 2: too far back (only 1 bytes"));
    // A distance of exactly the output so far is fine: "a" then 3 more of it.
    BitWriter ok;
    ok.bits(1, 1);
    ok.bits(1, 2);
    fixed_symbol(ok, 'a');
    fixed_match(ok, 3, 1);
    fixed_symbol(ok, 256);
    CHECK(inflate(ok.out) == bytes_of("aaaa"));
  }
  SUBCASE("a match can reach back exactly 32768 bytes") {
    BitWriter w;
    w.bits(1, 1);
    w.bits(1, 2);
    for (int i = 0; i < 32768; ++i) fixed_symbol(w, static_cast<unsigned>(i % 251));
    fixed_match(w, 258, 32768);
    fixed_symbol(w, 256);
    const Bytes out = inflate(w.out);
    REQUIRE(out.size() == 32768 + 258);
    for (std::size_t i = 0; i < 258; ++i) REQUIRE(out[32768 + i] == out[i]);
  }
  SUBCASE("symbols that have fixed codes but must not occur") {
    BitWriter w;
    w.bits(1, 1);
    w.bits(1, 2);
    fixed_symbol(w, 286);
    CHECK_DATA_ERROR(inflate(w.out), "invalid literal/length code");
    BitWriter d;
    d.bits(1, 1);
    d.bits(1, 2);
    fixed_symbol(d, 'a');
    fixed_symbol(d, 257);  // length 3
    d.code(30, 5);         // distance code 30
    CHECK_DATA_ERROR(inflate(d.out), "invalid distance code");
  }
  SUBCASE("dynamic block: counts out of range") {
    BitWriter w;
    w.bits(1, 1);
    w.bits(2, 2);
    w.bits(30, 5);  // 287 literal/length codes
    w.bits(0, 5);
    w.bits(0, 4);
    w.out.resize(w.out.size() + 16);
    CHECK_DATA_ERROR(inflate(w.out), "at most 286");
    BitWriter d;
    d.bits(1, 1);
    d.bits(2, 2);
    d.bits(0, 5);
    d.bits(30, 5);  // 31 distance codes
    d.bits(0, 4);
    d.out.resize(d.out.size() + 16);
    CHECK_DATA_ERROR(inflate(d.out), "at most 30");
  }
  SUBCASE("dynamic block: bad code-length codes") {
    BitWriter over;
    dynamic_header(over, 257, 1, std::vector<std::uint8_t>(19, 1), {});
    CHECK_DATA_ERROR(inflate(over.out), "code-length code is over-subscribed");
    std::vector<std::uint8_t> one(19, 0);
    one[0] = 1;
    BitWriter incomplete;
    dynamic_header(incomplete, 257, 1, one, {});
    CHECK_DATA_ERROR(inflate(incomplete.out), "code-length code is incomplete");
    BitWriter none;
    dynamic_header(none, 257, 1, std::vector<std::uint8_t>(19, 0), {});
    CHECK_DATA_ERROR(inflate(none.out), "code-length code has no codes");
  }
  SUBCASE("dynamic block: bad repeats") {
    BitWriter first;
    dynamic_header(first, 257, 1, default_cl_lengths(), {{16, 0}});
    CHECK_DATA_ERROR(inflate(first.out), "no previous length");
    BitWriter past;
    dynamic_header(past, 257, 1, default_cl_lengths(), {{18, 127}, {18, 127}, {18, 0}});  // 138 + 138 + 11 > 258
    CHECK_DATA_ERROR(inflate(past.out), "runs past");
  }
  std::vector<std::uint8_t> lit(258, 0);
  SUBCASE("dynamic block: over-subscribed, incomplete and missing codes") {
    lit['a'] = lit['b'] = lit[256] = 1;
    BitWriter over;
    dynamic_header(over, lit, {1});
    CHECK_DATA_ERROR(inflate(over.out), "literal/length code is over-subscribed");
    lit['b'] = 0;
    lit['a'] = lit[256] = 2;
    BitWriter incomplete;
    dynamic_header(incomplete, lit, {1});
    CHECK_DATA_ERROR(inflate(incomplete.out), "literal/length code is incomplete");
    lit[256] = 0;
    lit['a'] = 1;
    lit['b'] = 1;
    BitWriter no_end;
    dynamic_header(no_end, lit, {1});
    CHECK_DATA_ERROR(inflate(no_end.out), "no code for end-of-block");
    lit['a'] = lit[256] = 1;
    lit['b'] = 0;
    BitWriter dist;
    dynamic_header(dist, lit, {1, 1, 1});
    CHECK_DATA_ERROR(inflate(dist.out), "distance code is over-subscribed");
  }
  SUBCASE("dynamic block: the one-code and no-code distance trees encoders emit") {
    lit['a'] = lit['b'] = lit[256] = lit[257] = 2;  // four 2-bit codes
    BitWriter w;
    dynamic_header(w, lit, {1});  // one distance code (distance 1), one bit long
    const auto codes = canonical_codes(lit);
    w.code(codes['a'], 2);
    w.code(codes['b'], 2);
    w.code(codes[257], 2);  // length 3
    w.code(0, 1);           // distance 1
    w.code(codes['a'], 2);
    w.code(codes[256], 2);
    CHECK(inflate(w.out) == bytes_of("abbbba"));
    // The unused distance bit pattern is invalid.
    BitWriter bad;
    dynamic_header(bad, lit, {1});
    bad.code(codes['a'], 2);
    bad.code(codes[257], 2);
    bad.code(1, 1);
    CHECK_DATA_ERROR(inflate(bad.out), "invalid distance code");

    std::vector<std::uint8_t> lit2(257, 0);
    lit2['z'] = lit2[256] = 1;
    BitWriter literals_only;
    dynamic_header(literals_only, lit2, {0});
    literals_only.code(0, 1);
    literals_only.code(0, 1);
    literals_only.code(1, 1);
    CHECK(inflate(literals_only.out) == bytes_of("zz"));
  }
}

TEST_CASE("gunzip: output is capped by max_output") {
  const Bytes p = fixture_payload(36000);
  for (const char* name : {"level0.gz", "level6.gz"}) {
    const Bytes gz = fixture(name);
    CHECK(data::gunzip(gz, name, p.size()) == p);
    CHECK_DATA_ERROR(data::gunzip(gz, name, p.size() - 1), "exceeds the maximum of 35999 bytes");
    CHECK_DATA_ERROR(data::gunzip(gz, name, 0), "exceeds the maximum");
  }
  // A bomb: 4 bytes of matches per kilobyte of output; stopped at the cap, not at the end.
  BitWriter w;
  w.bits(1, 1);
  w.bits(1, 2);
  fixed_symbol(w, 'a');
  for (int i = 0; i < 40000; ++i) fixed_match(w, 258, 1);
  fixed_symbol(w, 256);
  CHECK(inflate(w.out).size() == 1 + 40000 * 258);
  CHECK_DATA_ERROR(inflate(w.out, 1 << 20), "exceeds the maximum of 1048576 bytes");
  // A forged size field does not allocate: the file is tiny and the hint is capped.
  Bytes forged = gzip_stored(bytes_of("hi"));
  forged[forged.size() - 1] = 0xFF;
  CHECK_DATA_ERROR(data::gunzip(forged, "forged"), "size mismatch");
}

// ================================================================================================
TEST_CASE("idx: element types, shapes, compressed and plain") {
  TempDir dir;
  {
    const fs::path f = dir.write("u8.idx", idx_bytes(0x08, {2, 3}, Bytes{0, 1, 2, 250, 254, 255}));
    const data::IdxFile idx = data::read_idx(f);
    CHECK(idx.type() == data::IdxType::u8);
    CHECK(idx.dims() == std::vector<std::size_t>{2, 3});
    CHECK(idx.count() == 6);
    CHECK_FALSE(idx.compressed());
    CHECK(idx.data_offset() == 12);
    CHECK(idx.at<int>(3) == 250);
  }
  const auto check_values = [&](std::uint8_t type, const Bytes& raw, const std::vector<double>& want) {
    const Bytes content = idx_bytes(type, {static_cast<std::uint32_t>(want.size())}, raw);
    for (const bool gz : {false, true}) {
      const data::IdxFile idx = data::parse_idx(gz ? gzip_stored(content) : content, "values");
      CHECK(idx.compressed() == gz);
      std::vector<double> got(want.size());
      idx.copy_to(std::span<double>(got));
      CHECK(got == want);
    }
  };
  check_values(0x09, {0x80, 0x7F, 0xFF}, {-128, 127, -1});
  check_values(0x0B, {0xFF, 0xFE, 0x01, 0x2C}, {-2, 300});
  check_values(0x0C, {0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x01, 0x00, 0x00}, {-1, 65536});
  check_values(0x0D, {0x3F, 0xC0, 0, 0, 0xBE, 0x80, 0, 0}, {1.5, -0.25});
  check_values(0x0E, {0x40, 0x09, 0x21, 0xFB, 0x54, 0x44, 0x2D, 0x18}, {3.141592653589793});
}

TEST_CASE("idx: malformed files name the file, the byte and the problem") {
  TempDir dir;
  const auto err = [&](const std::string& file, const Bytes& content) {
    const fs::path p = dir.write(file, content);
    const DataError e = data_error([&] { data::read_idx(p); });
    CHECK(e.file() == p.string());
    return e;
  };
  DataError e = err("magic.idx", Bytes{1, 0, 8, 1, 0, 0, 0, 1, 5});
  CHECK(e.offset() == 0);
  CHECK(contains(e.what(), "not an IDX file"));
  e = err("type.idx", Bytes{0, 0, 0x0A, 1, 0, 0, 0, 1, 5});
  CHECK(e.offset() == 2);
  CHECK(contains(e.what(), "unknown IDX element type 0x0a"));
  e = err("rank0.idx", Bytes{0, 0, 8, 0});
  CHECK(contains(e.what(), "0 dimensions"));
  e = err("short.idx", Bytes{0, 0});
  CHECK(contains(e.what(), "truncated"));
  e = err("header.idx", Bytes{0, 0, 8, 3, 0, 0, 0, 1});
  CHECK(e.offset() == 8);
  CHECK(contains(e.what(), "truncated: the header declares 3 dimensions"));
  e = err("zero.idx", idx_bytes(0x08, {2, 0}, {}));
  CHECK(e.offset() == 8);
  CHECK(contains(e.what(), "dimension 1 is 0"));
  e = err("overflow.idx", idx_bytes(0x0E, {0xFFFFFFFFU, 0xFFFFFFFFU, 0xFFFFFFFFU}, Bytes(8)));
  CHECK(contains(e.what(), "overflow"));
  e = err("huge.idx", idx_bytes(0x08, {0x7FFFFFFFU, 0x7FFFFFFFU}, Bytes(8)));  // 4.6e18 bytes claimed
  CHECK(contains(e.what(), "truncated: dimensions 2147483647x2147483647"));
  e = err("truncated.idx", idx_bytes(0x08, {3, 2}, Bytes(5)));
  CHECK(e.offset() == 17);
  CHECK(contains(e.what(), "truncated: dimensions 3x2 of unsigned byte need 6 bytes of data, the file has 5"));
  e = err("trailing.idx", idx_bytes(0x0C, {2}, Bytes(9)));
  CHECK(e.offset() == 16);
  CHECK(contains(e.what(), "1 trailing bytes"));
  // A compressed file's offsets are into its decompressed content, and the message says so.
  e = err("truncated.idx.gz", gzip_stored(idx_bytes(0x08, {3, 2}, Bytes(5))));
  CHECK(e.offset() == 17);
  CHECK(contains(e.what(), "decompressed"));
  // A damaged gzip layer reports the gzip problem, in compressed offsets.
  Bytes gz = gzip_stored(idx_bytes(0x08, {3}, Bytes(3)));
  gz.resize(gz.size() - 3);
  e = err("cut.idx.gz", gz);
  CHECK(contains(e.what(), "truncated"));
  CHECK(e.offset() == gz.size());

  const DataError missing = data_error([&] { data::read_idx(dir.path / "absent.idx"); });
  CHECK(contains(missing.what(), "absent.idx"));
  CHECK(contains(missing.what(), "no such file"));
}

TEST_CASE("idx: a gzip bomb stops where its header's dimensions end") {
  TempDir dir;
  // Ten 28x28 images announced (16 + 7840 bytes), then 256 MiB of zeros: a valid gzip file of 1.6 MB.
  const Bytes header = idx_bytes(0x08, {10, 28, 28}, {});
  const fs::path bomb = dir.write("bomb-images-idx3-ubyte.gz", gzip_bomb(header, std::size_t{256} << 20));
  const std::size_t before = peak_rss();
  const DataError e = data_error([&] { data::read_idx(bomb); });
  const std::size_t growth = peak_rss() - before;
  INFO(std::string(e.what()));
  CHECK(e.file() == bomb.string());
  CHECK(contains(e.what(), "the data inflates past the 7856 bytes its IDX header announces"));
  // Stopped within one match of the announced size, a few dozen bytes into the compressed file:
  // after the 10-byte gzip header, 17 literals and 31 matches of 258 zeros went through (the last
  // one crossing the announced size), and the 32nd match is refused.
  CHECK(contains(e.what(), "(8015 bytes inflated by this offset)"));
  CHECK(e.offset() == 79);
  // Memory in proportion to the announced size, not to the 256 MiB the file inflates to.
  INFO("peak resident memory grew by " << growth << " bytes");
  CHECK(growth < (std::size_t{32} << 20));

  // The same content within its announced size loads; only the excess is refused.
  const data::IdxFile fits = data::read_idx(dir.write("fits.gz", gzip_bomb(header, 7840)));
  CHECK(fits.dims() == std::vector<std::size_t>{10, 28, 28});
  CHECK(fits.compressed());

  // A header announcing more than the file could inflate to is refused before anything is sized
  // from it: 2^20 images are 822 MB, and 40 bytes of gzip data inflate to 41280 bytes at most.
  const Bytes huge = gzip_stored(idx_bytes(0x08, {1U << 20, 28, 28}, Bytes(4)));
  const DataError h = data_error([&] { data::parse_idx(huge, "huge.gz"); });
  INFO(std::string(h.what()));
  CHECK(h.offset() == 4);
  CHECK(contains(h.what(), "dimensions 1048576x28x28 of unsigned byte announce 822083600 bytes of content, more than the " +
                               std::to_string(huge.size() * 1032) + " that " + std::to_string(huge.size()) +
                               " bytes of gzip data can inflate to"));
  // And one announcing more than max_output, however well the file compresses.
  const DataError m = data_error([&] { data::parse_idx(gzip_bomb(header, 7840), "capped.gz", 4096); });
  INFO(std::string(m.what()));
  CHECK(contains(m.what(), "announce 7856 bytes of content, more than the maximum of 4096 bytes allowed"));
  // A malformed header is reported as soon as it is inflated, with its offset in the content.
  Bytes bad_magic = header;
  bad_magic[1] = 7;
  const DataError b = data_error([&] { data::parse_idx(gzip_bomb(bad_magic, std::size_t{64} << 20), "magic.gz"); });
  INFO(std::string(b.what()));
  CHECK(b.offset() == 0);
  CHECK(contains(b.what(), "not an IDX file"));
  CHECK(contains(b.what(), "(offset in the decompressed data)"));
}

TEST_CASE("load_idx_classification: happy path and inconsistent pairs") {
  TempDir dir;
  // 5 samples of 2x3 images; sample i's pixels are 10i .. 10i+5.
  Bytes pixels;
  for (std::uint8_t i = 0; i < 5; ++i)
    for (std::uint8_t k = 0; k < 6; ++k) pixels.push_back(static_cast<std::uint8_t>(10 * i + k));
  const fs::path images = dir.write("images.idx.gz", gzip_stored(idx_bytes(0x08, {5, 2, 3}, pixels)));
  const fs::path labels = dir.write("labels.idx", idx_bytes(0x08, {5}, Bytes{3, 0, 1, 3, 2}));
  const auto ds = data::load_idx_classification<float>(images, labels, 4, 1.0F / 255.0F, "toy");
  CHECK(ds.size() == 5);
  CHECK(ds.feature_size() == 6);
  CHECK(ds.classes == 4);
  CHECK(ds.name == "toy");
  CHECK(ds.target_kind() == TargetKind::labels);
  CHECK(ds.labels == std::vector<std::int32_t>{3, 0, 1, 3, 2});
  CHECK(ds.inputs(4, 2) == doctest::Approx(24.0F / 255.0F));
  CHECK(ds.inputs(0, 4) == doctest::Approx(40.0F / 255.0F));
  const auto plain = data::load_idx_classification<double>(dir.write("images.idx", idx_bytes(0x08, {5, 6}, pixels)), labels, 4, 1.0);
  CHECK(plain.inputs(5, 4) == 45.0);
  CHECK(plain.name == (dir.path / "images.idx").string());

  SUBCASE("label count disagrees with image count") {
    const fs::path four = dir.write("four.idx", idx_bytes(0x08, {4}, Bytes{0, 1, 2, 3}));
    const DataError e = data_error([&] { data::load_idx_classification<float>(images, four, 4); });
    CHECK(e.file() == four.string());
    CHECK(contains(e.what(), "holds 4 labels but " + images.string() + " holds 5 samples"));
  }
  SUBCASE("label out of range") {
    const fs::path bad = dir.write("bad.idx", idx_bytes(0x08, {5}, Bytes{3, 0, 1, 7, 2}));
    const DataError e = data_error([&] { data::load_idx_classification<float>(images, bad, 4); });
    CHECK(e.file() == bad.string());
    CHECK(e.offset() == 8 + 3);
    CHECK(contains(e.what(), "sample 3 has label 7, outside [0, 4)"));
    const fs::path negative = dir.write("negative.idx", idx_bytes(0x09, {5}, Bytes{3, 0, 0xFF, 1, 2}));
    CHECK_DATA_ERROR(data::load_idx_classification<float>(images, negative, 4), "sample 2 has label -1");
  }
  SUBCASE("labels of the wrong shape or type, images of rank 1") {
    const fs::path matrix = dir.write("matrix.idx", idx_bytes(0x08, {5, 1}, Bytes{0, 1, 2, 3, 0}));
    CHECK_DATA_ERROR(data::load_idx_classification<float>(images, matrix, 4), "labels must have 1 dimension");
    const fs::path floats = dir.write("floats.idx", idx_bytes(0x0D, {1}, Bytes{0, 0, 0, 0}));
    CHECK_DATA_ERROR(data::load_idx_classification<float>(images, floats, 4), "labels must be integers");
    const fs::path flat = dir.write("flat.idx", idx_bytes(0x08, {5}, Bytes(5)));
    CHECK_DATA_ERROR(data::load_idx_classification<float>(flat, labels, 4), "at least 2 dimensions");
  }
  CHECK_THROWS_AS(data::load_idx_classification<float>(images, labels, 0), ConfigError);
}

TEST_CASE("Dataset: subset, split, validate") {
  data::Dataset<float> ds;
  ds.inputs = Matrix<float>(2, 6);
  for (Eigen::Index i = 0; i < 6; ++i) ds.inputs.col(i) << float(i), float(-i);
  ds.labels = {0, 1, 2, 0, 1, 2};
  ds.classes = 3;
  ds.name = "toy";
  ds.validate();
  const auto s = data::subset(ds, 2, 3);
  CHECK(s.size() == 3);
  CHECK(s.inputs(0, 0) == 2.0F);
  CHECK(s.labels == std::vector<std::int32_t>{2, 0, 1});
  CHECK(s.name == "toy[2:5]");
  const auto [train, validation] = data::split(ds, 4);
  CHECK(train.size() == 4);
  CHECK(validation.size() == 2);
  CHECK(validation.inputs(1, 1) == -5.0F);
  CHECK(data::subset(ds, 6, 0).size() == 0);
  CHECK_THROWS_AS(data::subset(ds, 5, 2), ConfigError);
  CHECK_THROWS_AS(data::split(ds, 7), ConfigError);

  data::Dataset<float> reg;
  reg.inputs = Matrix<float>::Zero(3, 4);
  reg.targets = Matrix<float>::Ones(2, 4);
  CHECK(reg.target_kind() == TargetKind::values);
  reg.validate();
  CHECK(data::subset(reg, 1, 2).targets.cols() == 2);
  reg.targets = Matrix<float>::Ones(2, 3);
  CHECK_THROWS_AS(reg.validate(), ShapeError);

  ds.labels[4] = 3;
  CHECK_THROWS_WITH_AS(ds.validate(), doctest::Contains("sample 4 has label 3"), ConfigError);
  ds.labels.pop_back();
  CHECK_THROWS_AS(ds.validate(), ShapeError);
}

// ================================================================================================
namespace {

// n samples of 3 features; sample i is (i, i + 0.5, -i) with label i % 7.
data::Dataset<float> toy(std::size_t n) {
  data::Dataset<float> ds;
  ds.inputs.resize(3, static_cast<Eigen::Index>(n));
  for (std::size_t i = 0; i < n; ++i) {
    const auto f = static_cast<float>(i);
    ds.inputs.col(static_cast<Eigen::Index>(i)) << f, f + 0.5F, -f;
    ds.labels.push_back(static_cast<std::int32_t>(i % 7));
  }
  ds.classes = 7;
  ds.name = "toy";
  return ds;
}

struct Seen {
  std::vector<std::uint64_t> ids;
  std::vector<std::int32_t> labels;
  std::vector<float> inputs;
  std::size_t index = 0, global_size = 0;
  std::uint64_t epoch = 0;
  bool operator==(const Seen&) const = default;
};

// Every batch of the rest of the epoch, checked against the data set.
std::vector<Seen> drain(data::Loader<float>& loader, const data::Dataset<float>& ds) {
  std::vector<Seen> out;
  while (const data::Batch<float>* b = loader.next()) {
    Seen s{std::vector<std::uint64_t>(b->ids.begin(), b->ids.end()),
           std::vector<std::int32_t>(b->targets.labels.begin(), b->targets.labels.end()),
           std::vector<float>(b->inputs.data(), b->inputs.data() + b->inputs.size()),
           b->index, b->global_size, b->epoch};
    REQUIRE(b->size() == s.ids.size());
    REQUIRE(static_cast<std::size_t>(b->inputs.cols()) == b->size());
    REQUIRE(b->inputs.rows() == 3);
    REQUIRE(s.labels.size() == b->size());
    for (std::size_t j = 0; j < b->size(); ++j) {
      const auto col = static_cast<Eigen::Index>(j);
      REQUIRE(b->inputs.col(col) == ds.inputs.col(static_cast<Eigen::Index>(s.ids[j])));
      REQUIRE(s.labels[j] == ds.labels[s.ids[j]]);
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<Seen> epoch_of(const data::Dataset<float>& ds, data::LoaderOptions o, std::uint64_t epoch, std::size_t first = 0) {
  data::Loader<float> loader(ds, o);
  loader.start_epoch(epoch, first);
  return drain(loader, ds);
}

}  // namespace

TEST_CASE("Loader: a seeded permutation per epoch, identical with and without prefetch") {
  const auto ds = toy(103);
  data::LoaderOptions o;
  o.batch_size = 10;
  o.seed = 5;
  o.prefetch = 0;
  data::Loader<float> loader(ds, o);
  CHECK(loader.batches_per_epoch() == 11);
  const auto e0 = drain(loader, ds);
  REQUIRE(e0.size() == 11);
  CHECK(e0.back().ids.size() == 3);
  CHECK(e0.back().global_size == 3);
  CHECK(e0.front().global_size == 10);
  CHECK(loader.next() == nullptr);  // stays at the end
  std::vector<std::uint64_t> all;
  for (const auto& s : e0) all.insert(all.end(), s.ids.begin(), s.ids.end());
  std::vector<std::uint64_t> sorted = all;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::uint64_t> expect(103);
  std::iota(expect.begin(), expect.end(), std::uint64_t{0});
  CHECK(sorted == expect);  // a permutation
  CHECK(all != expect);     // and shuffled

  loader.start_epoch(1);
  const auto e1 = drain(loader, ds);
  CHECK(e1.front().ids != e0.front().ids);
  CHECK(e1.front().epoch == 1);

  // The same (seed, epoch) in any Loader, with any prefetch depth: the same batches.
  for (std::size_t prefetch : {1, 2, 5, 50}) {
    o.prefetch = prefetch;
    CHECK(epoch_of(ds, o, 0) == e0);
    CHECK(epoch_of(ds, o, 1) == e1);
  }
  o.seed = 6;
  CHECK(epoch_of(ds, o, 0) != e0);

  // The order is drawn with flotilla's Generator and shuffle, from (seed, epoch) alone.
  std::vector<std::uint64_t> perm(103);
  std::iota(perm.begin(), perm.end(), std::uint64_t{0});
  Generator g = Generator(5).fork(1);
  flotilla::shuffle(perm.begin(), perm.end(), g);
  std::vector<std::uint64_t> all1;
  for (const auto& s : e1) all1.insert(all1.end(), s.ids.begin(), s.ids.end());
  CHECK(all1 == perm);

  o.shuffle = false;
  const auto plain = epoch_of(ds, o, 3);
  CHECK(plain.front().ids == std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
}

TEST_CASE("Loader: shards of global batch b concatenate to the single loader's batch b") {
  for (const std::size_t n : {1, 7, 10, 23, 30, 64}) {
    for (const std::size_t shards : {1, 2, 3, 4}) {
      for (const std::size_t batch : {1, 3, 5}) {
        for (const bool drop_last : {false, true}) {
          INFO("n=" << n << " shards=" << shards << " batch=" << batch << " drop_last=" << drop_last);
          const auto ds = toy(n);
          data::LoaderOptions o;
          o.batch_size = batch * shards;
          o.seed = 11;
          o.drop_last = drop_last;
          o.prefetch = n % 2;
          if (drop_last && n < batch * shards) {
            CHECK_THROWS_AS(data::Loader<float>(ds, o), ConfigError);
            continue;
          }
          const auto whole = epoch_of(ds, o, 2);
          std::vector<std::vector<Seen>> parts;
          for (std::size_t s = 0; s < shards; ++s) {
            o.batch_size = batch;
            o.shard_count = shards;
            o.shard_index = s;
            parts.push_back(epoch_of(ds, o, 2));
            REQUIRE(parts.back().size() == whole.size());  // every shard, the same number of batches
          }
          for (std::size_t b = 0; b < whole.size(); ++b) {
            Seen joined;
            std::size_t previous = batch;
            for (std::size_t s = 0; s < shards; ++s) {
              const Seen& part = parts[s][b];
              REQUIRE(part.index == b);
              REQUIRE(part.global_size == whole[b].ids.size());
              REQUIRE(part.ids.size() <= previous);                  // earlier shards get the extra samples,
              REQUIRE(part.ids.size() + 1 >= parts[0][b].ids.size());  // at most one each
              previous = part.ids.size();
              joined.ids.insert(joined.ids.end(), part.ids.begin(), part.ids.end());
              joined.labels.insert(joined.labels.end(), part.labels.begin(), part.labels.end());
              joined.inputs.insert(joined.inputs.end(), part.inputs.begin(), part.inputs.end());
            }
            REQUIRE(joined.ids == whole[b].ids);
            REQUIRE(joined.labels == whole[b].labels);
            REQUIRE(joined.inputs == whole[b].inputs);
          }
        }
      }
    }
  }
}

TEST_CASE("Loader: the last partial global batch, drop_last, empty shards") {
  const auto ds = toy(10);
  data::LoaderOptions o;
  o.batch_size = 4;
  o.shuffle = false;
  auto e = epoch_of(ds, o, 0);
  REQUIRE(e.size() == 3);
  CHECK(e[2].ids == std::vector<std::uint64_t>{8, 9});
  CHECK(e[2].global_size == 2);
  o.drop_last = true;
  CHECK(epoch_of(ds, o, 0).size() == 2);

  // 7 samples, 3 shards of 2: the second global batch has 1 sample, for shard 0 only.
  const auto seven = toy(7);
  o = data::LoaderOptions{};
  o.batch_size = 2;
  o.shard_count = 3;
  o.shuffle = false;
  std::vector<std::size_t> sizes;
  for (std::size_t s = 0; s < 3; ++s) {
    o.shard_index = s;
    for (std::size_t prefetch : {0, 3}) {
      o.prefetch = prefetch;
      const auto part = epoch_of(seven, o, 0);
      REQUIRE(part.size() == 2);
      CHECK(part[1].global_size == 1);
      if (prefetch == 0) sizes.push_back(part[1].ids.size());
    }
  }
  CHECK(sizes == std::vector<std::size_t>{1, 0, 0});
  // 10 samples, 3 shards of 2: the last global batch has 4, split 2, 1, 1.
  o.prefetch = 0;
  sizes.clear();
  for (std::size_t s = 0; s < 3; ++s) {
    o.shard_index = s;
    const auto part = epoch_of(ds, o, 0);
    sizes.push_back(part[1].ids.size());
    CHECK(part[1].global_size == 4);
  }
  CHECK(sizes == std::vector<std::size_t>{2, 1, 1});
}

TEST_CASE("Loader: resuming mid-epoch gives the rest of the uninterrupted epoch") {
  const auto ds = toy(50);
  data::LoaderOptions o;
  o.batch_size = 4;
  o.seed = 3;
  for (std::size_t prefetch : {0, 2}) {
    o.prefetch = prefetch;
    const auto whole = epoch_of(ds, o, 4);
    REQUIRE(whole.size() == 13);
    for (std::size_t first : {0, 1, 5, 12, 13}) {
      const auto rest = epoch_of(ds, o, 4, first);
      CHECK(rest == std::vector<Seen>(whole.begin() + static_cast<std::ptrdiff_t>(first), whole.end()));
    }
    data::Loader<float> loader(ds, o);
    CHECK_THROWS_AS(loader.start_epoch(0, 14), ConfigError);
    // Abandoning an epoch part way (the prefetch thread waiting on a full ring) and restarting.
    loader.start_epoch(4);
    REQUIRE(loader.next() != nullptr);
    loader.start_epoch(4, 2);
    CHECK(drain(loader, ds) == std::vector<Seen>(whole.begin() + 2, whole.end()));
    loader.start_epoch(4);
    REQUIRE(loader.next() != nullptr);
  }  // destroyed mid-epoch
}

TEST_CASE("Loader: a batch stays valid while later ones are gathered") {
  const auto ds = toy(64);
  data::LoaderOptions o;
  o.batch_size = 4;
  o.prefetch = 1;
  data::Loader<float> loader(ds, o);
  for (int i = 0; i < 8; ++i) {
    const data::Batch<float>* b = loader.next();
    REQUIRE(b != nullptr);
    const std::vector<std::uint64_t> ids(b->ids.begin(), b->ids.end());
    const std::vector<float> inputs(b->inputs.data(), b->inputs.data() + b->inputs.size());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // give the thread time to run ahead
    CHECK(std::vector<std::uint64_t>(b->ids.begin(), b->ids.end()) == ids);
    CHECK(std::vector<float>(b->inputs.data(), b->inputs.data() + b->inputs.size()) == inputs);
  }
}

TEST_CASE("Loader: regression targets, option checks, errors from the gathering thread") {
  data::Dataset<double> reg;
  reg.inputs = Matrix<double>::Random(2, 9);
  reg.targets = Matrix<double>::Random(3, 9);
  data::LoaderOptions o;
  o.batch_size = 4;
  data::Loader<double> loader(reg, o);
  while (const auto* b = loader.next()) {
    CHECK(b->targets.labels.empty());
    REQUIRE(b->targets.values.cols() == static_cast<Eigen::Index>(b->size()));
    for (std::size_t j = 0; j < b->size(); ++j)
      CHECK(b->targets.values.col(static_cast<Eigen::Index>(j)) == reg.targets.col(static_cast<Eigen::Index>(b->ids[j])));
  }

  const auto ds = toy(20);
  const auto config_error = [&](data::LoaderOptions bad, const char* field) {
    CHECK_THROWS_WITH_AS(data::Loader<float>(ds, bad), doctest::Contains(field), ConfigError);
  };
  data::LoaderOptions bad;
  bad.batch_size = 0;
  config_error(bad, "batch_size");
  bad = {};
  bad.shard_count = 0;
  config_error(bad, "shard_count");
  bad = {};
  bad.shard_count = 2;
  bad.shard_index = 2;
  config_error(bad, "shard_index");
  bad = {};
  bad.batch_size = 30;
  bad.drop_last = true;
  config_error(bad, "drop_last");
  const data::Dataset<float> empty;
  CHECK_THROWS_AS(data::Loader<float>(empty, data::LoaderOptions{}), ConfigError);

  // A data set that shrinks under a Loader: reported by next(), from the thread when prefetching.
  for (std::size_t prefetch : {0, 2}) {
    auto shrinking = toy(20);
    o = {};
    o.batch_size = 4;
    o.prefetch = prefetch;
    data::Loader<float> l(shrinking, o);
    shrinking.inputs.resize(3, 10);
    shrinking.labels.resize(10);
    CHECK_THROWS_WITH_AS(l.next(), doctest::Contains("changed size"), ConfigError);
    CHECK_THROWS_AS(l.next(), ConfigError);
    l.start_epoch(1);
  }
}

// ================================================================================================
TEST_CASE("Fashion-MNIST: the real files") {
  namespace fm = data::fashion_mnist;
  CHECK(fm::class_names[0] == "T-shirt/top");
  CHECK(fm::class_names[9] == "Ankle boot");

  const fs::path dir = fm::default_directory();
  if (!fs::exists(dir / "train-images-idx3-ubyte.gz") && !fs::exists(dir / "train-images-idx3-ubyte")) {
    MESSAGE("Fashion-MNIST not found in " << dir << " (apt-get install dataset-fashion-mnist); skipped");
    return;
  }
  const auto train = fm::load<float>(data::Split::train, dir);
  CHECK(train.size() == 60000);
  CHECK(train.feature_size() == 784);
  CHECK(train.classes == 10);
  CHECK(train.name == "fashion-mnist/train");
  CHECK(train.inputs.minCoeff() >= 0.0F);
  CHECK(train.inputs.maxCoeff() == doctest::Approx(1.0F));
  std::array<std::size_t, 10> per_class{};
  for (auto l : train.labels) ++per_class[static_cast<std::size_t>(l)];
  for (auto c : per_class) CHECK(c == 6000);

  const auto test = fm::load<double>(fm::Split::test, dir);
  CHECK(test.size() == 10000);
  CHECK(test.feature_size() == 784);
  CHECK(test.name == "fashion-mnist/test");
}

TEST_CASE("Fashion-MNIST: a missing directory says how to get the files") {
  namespace fm = data::fashion_mnist;
  const DataError e = data_error([&] { fm::load<float>(data::Split::test, "/nonexistent/fmnist"); });
  CHECK(contains(e.what(), "/nonexistent/fmnist/t10k-images-idx3-ubyte.gz"));
  CHECK(contains(e.what(), "apt-get install dataset-fashion-mnist"));
  CHECK(contains(e.what(), "FLOTILLA_FASHION_MNIST"));

  const char* saved = std::getenv("FLOTILLA_FASHION_MNIST");
  const std::string before = saved ? saved : "";
  ::setenv("FLOTILLA_FASHION_MNIST", "/somewhere/else", 1);
  CHECK(fm::default_directory() == fs::path("/somewhere/else"));
  ::unsetenv("FLOTILLA_FASHION_MNIST");
  CHECK(fm::default_directory() == fs::path("/usr/share/datasets/fashion-mnist"));
  if (saved) ::setenv("FLOTILLA_FASHION_MNIST", before.c_str(), 1);
}

}  // namespace unit_data
