// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Dense data files users already have: NumPy .npy and .npz, CSV, and data sets built from arrays in
// memory. Files are written byte by byte here, so that each field of each format is what the test
// says; tests/unit/numpy_files.py runs the last case on files that NumPy itself wrote.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/crc32.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/data/arrays.hpp"
#include "flotilla/data/csv.hpp"
#include "flotilla/data/dataset.hpp"
#include "flotilla/data/gzip.hpp"
#include "flotilla/data/npy.hpp"
#include "flotilla/data/npz.hpp"

namespace unit_data_files {

using namespace flotilla;
namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

namespace {

// ---- writing files ---------------------------------------------------------------------------

struct Scratch {
  fs::path path;
  Scratch() {
    const auto t = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    path = fs::temp_directory_path() /
           ("flotilla-test-data-files-" + std::to_string(detail::mix(t, reinterpret_cast<std::uintptr_t>(this))));
    fs::create_directories(path);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  fs::path write(const std::string& name, const Bytes& content) const {
    const fs::path p = path / name;
    std::ofstream f(p, std::ios::binary);
    f.write(reinterpret_cast<const char*>(content.data()), static_cast<std::streamsize>(content.size()));
    return p;
  }
  fs::path write(const std::string& name, std::string_view text) const { return write(name, Bytes(text.begin(), text.end())); }
};

bool has(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

// Runs f, which must throw DataError; returns it.
template <class F>
DataError expect_data_error(F&& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e;
  }
  FAIL("expected a DataError");
  return DataError("", 0, "");
}

template <class E, class F>
std::string expect_error(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("expected an exception");
  return {};
}

void put(Bytes& b, std::uint64_t v, std::size_t n, bool big_endian = false) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t shift = 8 * (big_endian ? n - 1 - i : i);
    b.push_back(static_cast<std::uint8_t>(v >> shift));
  }
}

// .npy content with the header NumPy writes: the dict, padded with spaces so that the values start
// at a multiple of 64, and a newline.
Bytes npy_file(std::string_view descr, bool fortran, std::string_view shape, const Bytes& values, int version = 1) {
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': " + (fortran ? "True" : "False") +
                       ", 'shape': " + std::string(shape) + ", }";
  const std::size_t preamble = version == 1 ? 10 : 12;
  while ((preamble + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(version), 0};
  put(b, header.size(), version == 1 ? 2 : 4);
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), values.begin(), values.end());
  return b;
}

// .npy content with exactly `header` as its header.
Bytes npy_raw(std::string_view header, const Bytes& values, int version = 1) {
  Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(version), 0};
  put(b, header.size(), version == 1 ? 2 : 4);
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), values.begin(), values.end());
  return b;
}

std::uint16_t half_of(float f) {  // exact for the normal values and zero used here
  const auto bits = std::bit_cast<std::uint32_t>(f);
  if ((bits & 0x7FFFFFFFU) == 0) return static_cast<std::uint16_t>(bits >> 16);
  const std::uint32_t exponent = ((bits >> 23) & 0xFFU) - 112;
  return static_cast<std::uint16_t>(((bits >> 16) & 0x8000U) | (exponent << 10) | ((bits >> 13) & 0x3FFU));
}

// The element types, and the value each test array holds at C index i.
struct Dtype {
  const char* code;  // without the byte order
  std::size_t size;
  char kind;  // 'f' float, 'i' signed, 'u' unsigned, 'b' bool
};
constexpr Dtype dtypes[] = {{"f2", 2, 'f'}, {"f4", 4, 'f'}, {"f8", 8, 'f'}, {"i1", 1, 'i'}, {"u1", 1, 'u'}, {"i2", 2, 'i'},
                            {"u2", 2, 'u'}, {"i4", 4, 'i'}, {"u4", 4, 'u'}, {"i8", 8, 'i'}, {"u8", 8, 'u'}, {"b1", 1, 'b'}};

double value_of(char kind, std::size_t i) {
  switch (kind) {
    case 'f':
      return static_cast<double>(i % 23) * 0.25 - 2;
    case 'i':
      return static_cast<double>(i % 23) - 11;
    case 'u':
      return static_cast<double>(i * 11 % 251);
    default:
      return i % 3 == 0 ? 1 : 0;
  }
}

std::uint64_t bits_of(const Dtype& t, double v) {
  if (t.kind == 'f') {
    if (t.size == 2) return half_of(static_cast<float>(v));
    if (t.size == 4) return std::bit_cast<std::uint32_t>(static_cast<float>(v));
    return std::bit_cast<std::uint64_t>(v);
  }
  return static_cast<std::uint64_t>(static_cast<std::int64_t>(v));
}

// The values of a C-order array of `shape`, laid out in C or Fortran order.
Bytes encode(const Dtype& t, const std::vector<std::size_t>& shape, bool fortran, bool big_endian) {
  std::size_t count = 1;
  for (const auto d : shape) count *= d;
  Bytes b;
  for (std::size_t s = 0; s < count; ++s) {
    std::size_t c = s;
    if (fortran) {  // stored index s (first axis fastest) -> C index (last axis fastest)
      std::size_t rest = s;
      c = 0;
      for (std::size_t k = 0; k < shape.size(); ++k) {
        std::size_t stride = 1;
        for (std::size_t m = k + 1; m < shape.size(); ++m) stride *= shape[m];
        c += (rest % shape[k]) * stride;
        rest /= shape[k];
      }
    }
    put(b, bits_of(t, value_of(t.kind, c)), t.size, big_endian);
  }
  return b;
}

// A zip archive written as Python's zipfile writes np.savez's: local header (with a ZIP64 extra
// field holding the sizes, as NumPy forces), data, central directory, end record.
struct ZipEntry {
  std::string name;
  Bytes content;         // what the member holds
  Bytes data;            // what is stored: content, or its raw DEFLATE stream
  std::uint16_t method = 0;
};

ZipEntry stored(std::string name, Bytes content) { return ZipEntry{std::move(name), content, content, 0}; }

// Raw DEFLATE of `content` in stored blocks (valid method-8 data, written without a compressor).
Bytes deflate_stored(const Bytes& content) {
  Bytes out;
  std::size_t pos = 0;
  do {
    const std::size_t n = std::min<std::size_t>(content.size() - pos, 65535);
    const bool last = pos + n == content.size();
    out.push_back(last ? 1 : 0);
    put(out, n, 2);
    put(out, ~n & 0xFFFFU, 2);
    out.insert(out.end(), content.begin() + static_cast<std::ptrdiff_t>(pos), content.begin() + static_cast<std::ptrdiff_t>(pos + n));
    pos += n;
  } while (pos < content.size());
  return out;
}

ZipEntry deflated(std::string name, Bytes content) {
  Bytes data = deflate_stored(content);
  return ZipEntry{std::move(name), std::move(content), std::move(data), 8};
}

struct ZipLayout {
  std::vector<std::size_t> local;      // offset of each local header
  std::vector<std::size_t> data;       // offset of each member's data
  std::vector<std::size_t> entry;      // offset of each central directory entry
  std::size_t directory = 0;
  std::size_t end = 0;                 // offset of the end record
};

Bytes zip_archive(const std::vector<ZipEntry>& entries, ZipLayout* layout = nullptr, std::string_view comment = {}) {
  Bytes b;
  ZipLayout l;
  for (const auto& e : entries) {
    l.local.push_back(b.size());
    put(b, 0x04034b50, 4);
    put(b, 20, 2);
    put(b, 0, 2);
    put(b, e.method, 2);
    put(b, 0, 4);  // time, date
    put(b, crc32(std::span<const std::uint8_t>(e.content)), 4);
    put(b, e.data.size(), 4);
    put(b, e.content.size(), 4);
    put(b, e.name.size(), 2);
    put(b, 20, 2);  // a ZIP64 extra field, as np.savez writes
    b.insert(b.end(), e.name.begin(), e.name.end());
    put(b, 1, 2);
    put(b, 16, 2);
    put(b, e.content.size(), 8);
    put(b, e.data.size(), 8);
    l.data.push_back(b.size());
    b.insert(b.end(), e.data.begin(), e.data.end());
  }
  l.directory = b.size();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    l.entry.push_back(b.size());
    put(b, 0x02014b50, 4);
    put(b, 0x0314, 2);
    put(b, 20, 2);
    put(b, 0, 2);
    put(b, e.method, 2);
    put(b, 0, 4);
    put(b, crc32(std::span<const std::uint8_t>(e.content)), 4);
    put(b, e.data.size(), 4);
    put(b, e.content.size(), 4);
    put(b, e.name.size(), 2);
    put(b, 0, 2);
    put(b, 0, 2);
    put(b, 0, 2);
    put(b, 0, 2);
    put(b, 0, 4);
    put(b, l.local[i], 4);
    b.insert(b.end(), e.name.begin(), e.name.end());
  }
  l.end = b.size();
  put(b, 0x06054b50, 4);
  put(b, 0, 2);
  put(b, 0, 2);
  put(b, entries.size(), 2);
  put(b, entries.size(), 2);
  put(b, l.end - l.directory, 4);
  put(b, l.directory, 4);
  put(b, comment.size(), 2);
  b.insert(b.end(), comment.begin(), comment.end());
  if (layout != nullptr) *layout = l;
  return b;
}

void set32(Bytes& b, std::size_t at, std::uint32_t v) {
  for (std::size_t i = 0; i < 4; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
void set16(Bytes& b, std::size_t at, std::uint16_t v) {
  b[at] = static_cast<std::uint8_t>(v);
  b[at + 1] = static_cast<std::uint8_t>(v >> 8);
}

Bytes f4_values(const std::vector<float>& v) {
  Bytes b;
  for (const float f : v) put(b, std::bit_cast<std::uint32_t>(f), 4);
  return b;
}
Bytes i8_values(const std::vector<std::int64_t>& v) {
  Bytes b;
  for (const auto x : v) put(b, static_cast<std::uint64_t>(x), 8);
  return b;
}

}  // namespace

// ================================================================================================
// .npy

TEST_CASE("npy: every dtype, both byte orders, C and Fortran order") {
  const std::vector<std::size_t> shape = {2, 3, 4};
  int arrays = 0;
  for (const Dtype& t : dtypes) {
    for (const char order : {'<', '>'}) {
      for (const bool fortran : {false, true}) {
        const bool big = order == '>' && t.size > 1;
        const std::string descr = (t.size == 1 ? std::string("|") : std::string(1, order)) + t.code;
        if (t.size == 1 && order == '>') continue;  // one byte: '|' only
        INFO(descr << (fortran ? " Fortran" : " C"));
        const data::NpyArray a = data::parse_npy(npy_file(descr, fortran, "(2, 3, 4)", encode(t, shape, fortran, big)), "a.npy");
        CHECK(a.shape() == shape);
        CHECK(a.count() == 24);
        CHECK(a.fortran_order() == fortran);
        CHECK(a.big_endian() == big);
        CHECK(a.descr() == descr);
        CHECK(a.data_offset() == 128);
        CHECK(data::npy_type_size(a.type()) == t.size);
        const auto as_double = a.values<double>();
        const auto as_float = a.values<float>();
        bool all = true;
        for (std::size_t i = 0; i < 24; ++i) {
          const double want = value_of(t.kind, i);
          all = all && as_double[i] == want && as_float[i] == static_cast<float>(want) && a.at<double>(i) == want;
        }
        CHECK(all);
        ++arrays;
      }
    }
  }
  CHECK(arrays == 9 * 4 + 3 * 2);
  // Offsets of values in C order point at them in the file, whatever the storage order.
  const data::NpyArray f = data::parse_npy(npy_file("<i2", true, "(2, 3)", encode(dtypes[5], {2, 3}, true, false)), "f.npy");
  CHECK(f.offset_of(0) == 128);
  CHECK(f.offset_of(1) == 128 + 2 * 2);  // C (0, 1) is stored third
  CHECK(f.offset_of(3) == 128 + 2 * 1);  // C (1, 0) is stored second
  CHECK(f.shape_string() == "(2, 3)");
  // scale applies on conversion
  std::vector<float> scaled(6);
  f.copy_to(std::span<float>(scaled), 0.5F);
  CHECK(scaled[1] == static_cast<float>(value_of('i', 1) * 0.5));
  CHECK_THROWS_AS(f.copy_to(std::span<float>(scaled).first(5)), ShapeError);
}

TEST_CASE("npy: versions 2.0 and 3.0, scalars, empty arrays, headers as Python spells them") {
  const Bytes two = f4_values({1.5F, -2.0F, 3.25F});
  for (const int version : {2, 3}) {
    const data::NpyArray a = data::parse_npy(npy_file("<f4", false, "(3,)", two, version), "v.npy");
    CHECK(a.version() == version);
    CHECK(a.data_offset() == 128);
    CHECK(a.values<float>() == std::vector<float>{1.5F, -2.0F, 3.25F});
  }
  // Keys in any order, double quotes, no trailing comma, Python 2 longs, spaces, no newline.
  const data::NpyArray b = data::parse_npy(
      npy_raw("{ \"shape\" : ( 3L ,) , 'fortran_order':False,\"descr\":\"<f4\"}", two), "b.npy");
  CHECK(b.shape() == std::vector<std::size_t>{3});
  CHECK(b.values<double>() == std::vector<double>{1.5, -2.0, 3.25});
  // A 0-d array holds one value; an array with a zero dimension holds none.
  const data::NpyArray s = data::parse_npy(npy_file("<f8", false, "()", Bytes{0, 0, 0, 0, 0, 0, 0x0C, 0x40}), "s.npy");
  CHECK(s.rank() == 0);
  CHECK(s.count() == 1);
  CHECK(s.at<double>(0) == 3.5);
  CHECK(s.shape_string() == "()");
  const data::NpyArray e = data::parse_npy(npy_file("<f4", false, "(0, 5)", {}), "e.npy");
  CHECK(e.count() == 0);
  CHECK(e.values<float>().empty());
  // '?' is bool's other spelling
  const data::NpyArray q = data::parse_npy(npy_raw("{'descr': '|?', 'fortran_order': False, 'shape': (3,)}\n", Bytes{1, 0, 1}), "q.npy");
  CHECK(q.values<int>() == std::vector<int>{1, 0, 1});
}

TEST_CASE("npy: malformed files name the file, the byte and the problem") {
  Scratch dir;
  const Bytes three = f4_values({1, 2, 3});
  struct Case {
    const char* what;
    Bytes bytes;
    std::uint64_t offset;
    const char* message;
  };
  Bytes long_header = npy_file("<f4", false, "(3,)", three, 2);
  set32(long_header, 8, 5u << 20);
  Bytes bad_version = npy_file("<f4", false, "(3,)", three);
  bad_version[6] = 4;
  const std::vector<Case> cases = {
      {"empty", {}, 0, "truncated: 0 bytes"},
      {"magic", Bytes{0x93, 'N', 'U', 'M', 'P', 'X', 1, 0, 0, 0}, 5, "not a .npy file"},
      {"zip", Bytes{'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0}, 0, "zip archive"},
      {"short", Bytes{0x93, 'N', 'U', 'M', 'P', 'Y', 1}, 7, "truncated: 7 bytes"},
      {"version", bad_version, 6, "format version 4.0 is not supported"},
      {"header length", [] {
         Bytes b = npy_raw("{}", {});
         set16(b, 8, 500);
         return b;
       }(),
       12, "the header length says 500 bytes, the file has 2"},
      {"huge header", long_header, 8, "header length 5242880 is more than"},
      {"not a dict", npy_raw("['descr']", three), 10, "header: expected '{'"},
      {"missing key", npy_raw("{'descr': '<f4', 'shape': (3,)}", three), 10, "header: missing key 'fortran_order'"},
      {"unknown key", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}", three), 66,
       "header: unknown key 'x'"},
      {"twice", npy_raw("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", three), 27,
       "key 'descr' appears twice"},
      {"order", npy_raw("{'descr': '<f4', 'fortran_order': 0, 'shape': (3,)}", three), 44, "expected True or False"},
      {"shape", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': [3]}", three), 60, "expected a tuple"},
      {"negative", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (-3,)}", three), 61,
       "expected a non-negative integer dimension"},
      {"huge dimension", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,)}", three), 61,
       "dimension 0 is too large"},
      {"string", npy_raw("{'descr': '<f4, 'fortran_order': False, 'shape': (3,)}", three), 27, "expected ',' or '}'"},
      {"trailing text", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} x", three), 66, "unexpected text"},
      {"complex", npy_file("<c8", false, "(3,)", three), 20, "dtype '<c8' is complex"},
      {"object", npy_file("|O", false, "(3,)", three), 20, "holds Python objects"},
      {"unicode", npy_file("<U3", false, "(3,)", three), 20, "holds strings"},
      {"long double", npy_file("<f16", false, "(3,)", three), 20, "dtype '<f16' is not one flotilla reads"},
      {"native order", npy_file("=f4", false, "(3,)", three), 20, "no explicit byte order"},
      {"structured", npy_raw("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,)}", three), 20, "structured dtype"},
      {"truncated data", npy_file("<f4", false, "(4,)", three), 140, "shape (4,) of float32 needs 4 x 4 bytes of data, the file has 12"},
      {"overflow", npy_file("<f8", false, "(4294967296, 4294967296)", three), 140, "overflows"},
      {"larger than the file", npy_file("<f8", false, "(1000000, 1000000)", three), 140, "needs 1000000000000 x 8 bytes"},
      {"trailing", npy_file("<f4", false, "(2,)", three), 136, "4 trailing bytes after the 8 bytes of data"},
  };
  for (const auto& c : cases) {
    INFO(std::string(c.what));
    const fs::path p = dir.write(std::string(c.what) + ".npy", c.bytes);
    const DataError e = expect_data_error([&] { data::read_npy(p); });
    INFO(std::string(e.what()));
    CHECK(e.file() == p.string());
    CHECK(e.offset() == c.offset);
    CHECK(has(e.what(), c.message));
    CHECK(has(e.what(), p.string() + " (byte " + std::to_string(c.offset) + ")"));
  }
  const DataError missing = expect_data_error([&] { data::read_npy(dir.path / "absent.npy"); });
  CHECK(has(missing.what(), "absent.npy"));
  CHECK(has(missing.what(), "no such file"));
}

// ================================================================================================
// .npz

TEST_CASE("npz: stored and deflated members, names, CRC-32 checked, archive comments") {
  Scratch dir;
  const Bytes x = npy_file("<f4", false, "(2, 2)", f4_values({1, 2, 3, 4}));
  const Bytes y = npy_file("<i8", false, "(2,)", i8_values({1, 0}));
  // A DEFLATE stream with dynamic codes, written by zlib: .npy content of int8 values i % 7, i < 60.
  const Bytes zlib_stream = {
      0x9b, 0xec, 0x17, 0xea, 0x1b, 0x10, 0xc9, 0xc8, 0x50, 0xc6, 0x50, 0xad, 0x9e, 0x92, 0x5a, 0x9c, 0x5c, 0xa4, 0x6e, 0xa5,
      0xa0, 0x5e, 0x93, 0x69, 0xa8, 0xae, 0xa3, 0xa0, 0x9e, 0x96, 0x5f, 0x54, 0x52, 0x94, 0x98, 0x17, 0x9f, 0x5f, 0x94, 0x92,
      0x0a, 0x12, 0x77, 0x4b, 0xcc, 0x29, 0x4e, 0x05, 0x8a, 0x17, 0x67, 0x24, 0x16, 0xa4, 0x02, 0xf9, 0x1a, 0x66, 0x06, 0x3a,
      0x9a, 0x3a, 0x0a, 0xb5, 0x0a, 0xe4, 0x03, 0x2e, 0x06, 0x46, 0x26, 0x66, 0x16, 0x56, 0x36, 0xb2, 0x28, 0x00};
  const Bytes z_content = data::inflate_raw(zlib_stream, "zlib");
  REQUIRE(crc32(std::span<const std::uint8_t>(z_content)) == 0x48e1b847U);
  const ZipEntry z{"z.npy", z_content, zlib_stream, 8};
  const fs::path p = dir.write("d.npz", zip_archive({stored("x.npy", x), deflated("y.npy", y), z, stored("notes.txt", Bytes{'h', 'i'})},
                                                    nullptr, "a comment"));
  const data::NpzArchive a = data::read_npz(p);
  CHECK(a.members().size() == 4);
  CHECK(a.array_names() == std::vector<std::string>{"x", "y", "z"});
  CHECK(a.contains("x"));
  CHECK(a.contains("x.npy"));
  CHECK(a.contains("notes.txt"));
  CHECK_FALSE(a.contains("w"));
  CHECK(a.array("x").values<float>() == std::vector<float>{1, 2, 3, 4});
  CHECK(a.array("x.npy").member() == "x.npy");
  CHECK(a.array("x").what_array() == "x.npy in " + p.string());
  CHECK(a.array("y").values<std::int64_t>() == std::vector<std::int64_t>{1, 0});
  const auto zv = a.array("z").values<int>();
  REQUIRE(zv.size() == 60);
  bool all = true;
  for (std::size_t i = 0; i < 60; ++i) all = all && zv[i] == static_cast<int>(i % 7);
  CHECK(all);
  CHECK(a.member_bytes(a.members()[3]) == Bytes{'h', 'i'});

  const DataError none = expect_data_error([&] { (void)a.array("w"); });
  CHECK(has(none.what(), "no array 'w' in the archive (it holds 'x', 'y', 'z')"));
  CHECK(none.file() == p.string());
  // The member's own problems name it, at offsets in the archive.
  const DataError notes = expect_data_error([&] { (void)a.array("notes.txt"); });
  CHECK(has(notes.what(), "member 'notes.txt': not a .npy file"));
}

TEST_CASE("npz: malformed archives name the archive, the member and the byte") {
  Scratch dir;
  const Bytes x = npy_file("<f4", false, "(2,)", f4_values({1, 2}));
  ZipLayout l;
  const Bytes good = zip_archive({stored("x.npy", x), deflated("y.npy", x)}, &l);
  const auto check = [&](const char* name, const Bytes& bytes, std::uint64_t offset, const char* message, const char* member = "x") {
    INFO(std::string(name));
    const fs::path p = dir.write(std::string(name) + ".npz", bytes);
    const DataError e = expect_data_error([&] { (void)data::read_npz(p).array(member); });
    INFO(std::string(e.what()));
    CHECK(e.file() == p.string());
    CHECK(e.offset() == offset);
    CHECK(has(e.what(), message));
  };
  check("tiny", Bytes{'P', 'K'}, 0, "too short");
  check("npy", x, 0, "this is an .npy file; read it with read_npy()");
  Bytes no_end = good;
  no_end[l.end] = 'X';
  check("no end", no_end, no_end.size(), "no end-of-central-directory record");
  Bytes bad_comment = good;
  set16(bad_comment, l.end + 20, 5);  // a comment that would run past the end: no valid record
  check("comment", bad_comment, bad_comment.size(), "no end-of-central-directory record");
  Bytes zip64 = good;
  set32(zip64, l.end + 16, 0xFFFFFFFFU);
  check("zip64", zip64, l.end + 10, "ZIP64");
  {
    // A ZIP64 end-of-directory locator right before the end record.
    Bytes z = Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(l.end));
    put(z, 0x07064b50, 4);
    put(z, 0, 4);
    put(z, 0, 8);
    put(z, 1, 4);
    z.insert(z.end(), good.begin() + static_cast<std::ptrdiff_t>(l.end), good.end());
    check("zip64 locator", z, l.end, "ZIP64 archive");
  }
  Bytes split = good;
  set16(split, l.end + 4, 1);
  check("split", split, l.end + 4, "multi-disk");
  Bytes directory = good;
  set32(directory, l.end + 16, static_cast<std::uint32_t>(l.end));
  check("directory", directory, l.end + 12, "does not lie within the archive");
  Bytes entries = good;
  set16(entries, l.end + 8, 60);
  set16(entries, l.end + 10, 60);
  check("entries", entries, l.end + 10, "60 members cannot fit");
  Bytes signature = good;
  signature[l.entry[1]] = 'Q';
  check("entry signature", signature, l.entry[1], "central directory entry 1 has no entry signature");
  Bytes offset = good;
  set32(offset, l.entry[0] + 42, static_cast<std::uint32_t>(l.directory - 2));
  check("member offset", offset, l.entry[0] + 42, "member 'x.npy': its data (");
  Bytes crc = good;
  crc[l.data[0] + 70] ^= 1;
  check("crc", crc, l.data[0], "member 'x.npy': CRC-32 mismatch");
  Bytes method = good;
  set16(method, l.entry[0] + 10, 12);
  check("method", method, l.entry[0] + 10, "member 'x.npy': compression method 12 is not supported");
  Bytes encrypted = good;
  set16(encrypted, l.entry[0] + 8, 1);
  check("encrypted", encrypted, l.entry[0] + 8, "member 'x.npy': encrypted");
  Bytes local = good;
  local[l.local[0]] = 'Q';
  check("local signature", local, l.local[0], "no local header signature");
  Bytes local_name = good;
  local_name[l.local[0] + 30] = 'w';
  check("local name", local_name, l.local[0] + 30, "the local header names another member: \"w.npy\"");
  Bytes local_method = good;
  set16(local_method, l.local[0] + 8, 8);
  check("local method", local_method, l.local[0] + 8, "the local header's compression method 8 differs");
  Bytes stored_sizes = good;
  set32(stored_sizes, l.entry[0] + 24, static_cast<std::uint32_t>(x.size() - 1));
  check("stored sizes", stored_sizes, l.entry[0] + 20, "stored, but its compressed size");
  // Deflated member: a corrupt block type, at its offset in the archive.
  Bytes block = good;
  block[l.data[1]] = 0x07;  // final block of the reserved type 3
  check("deflate", block, l.data[1], "member 'y.npy'", "y");
  Bytes inflated_size = good;
  set32(inflated_size, l.entry[1] + 24, static_cast<std::uint32_t>(x.size() + 10));
  check("inflated size", inflated_size, l.data[1] + 5 + x.size(), "inflates to 136 bytes, the directory says 146", "y");
  Bytes ratio = good;
  set32(ratio, l.entry[1] + 24, 0x7FFFFFFFU);
  check("ratio", ratio, l.entry[1] + 24, "more than its 141 deflated bytes can inflate to", "y");
  // The .npy inside: offsets into the archive for a stored member, into the member for a deflated one.
  const Bytes bad_npy = npy_file("<c8", false, "(2,)", f4_values({1, 2, 3, 4}));
  ZipLayout m;
  const Bytes inner = zip_archive({stored("x.npy", bad_npy), deflated("y.npy", bad_npy)}, &m);
  check("inner stored", inner, m.data[0] + 20, "member 'x.npy': dtype '<c8' is complex");
  check("inner deflated", inner, 20, "(offset in the decompressed member)", "y");
  // And an archive of several valid members but a missing one lists them.
  const fs::path p = dir.write("ok.npz", good);
  CHECK(has(expect_data_error([&] { (void)data::read_npz(p).array("z"); }).what(), "it holds 'x', 'y'"));
}

// ================================================================================================
// Data sets from .npy and .npz

TEST_CASE("load_npy_dataset and load_npz_dataset: inputs, labels, targets") {
  Scratch dir;
  // 3 samples of 2x2 uint8 pixels, scaled; labels int32.
  const Bytes pixels = {0, 51, 102, 153, 204, 255, 10, 20, 30, 40, 50, 60};
  const fs::path x = dir.write("x.npy", npy_file("|u1", false, "(3, 2, 2)", pixels));
  Bytes labels;
  for (const std::int32_t v : {2, 0, 1}) put(labels, static_cast<std::uint32_t>(v), 4);
  const fs::path y = dir.write("y.npy", npy_file("<i4", false, "(3,)", labels));
  data::ArrayDatasetOptions o;
  o.scale = 1.0 / 255;
  const auto d = data::load_npy_dataset<float>(x, y, o);
  CHECK(d.size() == 3);
  CHECK(d.feature_size() == 4);
  CHECK(d.classes == 3);
  CHECK(d.labels == std::vector<std::int32_t>{2, 0, 1});
  CHECK(d.inputs(1, 0) == doctest::Approx(0.2));
  CHECK(d.inputs(1, 1) == doctest::Approx(1.0));
  CHECK(d.inputs(2, 2) == doctest::Approx(50.0 / 255));
  CHECK(d.name == x.string());
  CHECK_NOTHROW(d.validate());
  o.classes = 10;
  CHECK(data::load_npy_dataset<double>(x, y, o).classes == 10);
  // Labels of shape (samples, 1), as scikit-learn often leaves them; bool labels.
  CHECK(data::load_npy_dataset<float>(x, dir.write("y1.npy", npy_file("<i4", false, "(3, 1)", labels))).labels ==
        std::vector<std::int32_t>{2, 0, 1});
  CHECK(data::load_npy_dataset<float>(x, dir.write("yb.npy", npy_file("|b1", false, "(3,)", Bytes{1, 0, 1}))).classes == 2);

  // Regression: (samples) and (samples, outputs); a Fortran-order input matrix.
  data::ArrayDatasetOptions r;
  r.kind = TargetKind::values;
  const fs::path t1 = dir.write("t1.npy", npy_file("<f8", false, "(3,)", [] {
                                  Bytes b;
                                  for (const double v : {0.5, -1.0, 2.0}) put(b, std::bit_cast<std::uint64_t>(v), 8);
                                  return b;
                                }()));
  const auto reg = data::load_npy_dataset<double>(x, t1, r);
  CHECK(reg.target_kind() == TargetKind::values);
  CHECK(reg.targets.rows() == 1);
  CHECK(reg.targets(0, 1) == -1.0);
  CHECK(reg.labels.empty());
  CHECK_NOTHROW(reg.validate());
  const fs::path t2 = dir.write("t2.npy", npy_file("<f4", true, "(3, 2)", f4_values({1, 2, 3, 4, 5, 6})));  // column-major
  const auto reg2 = data::load_npy_dataset<float>(dir.write("xf.npy", npy_file("<f4", true, "(3, 2)", f4_values({1, 2, 3, 4, 5, 6}))),
                                                  t2, r);
  CHECK(reg2.inputs.rows() == 2);
  CHECK(reg2.inputs(0, 0) == 1);
  CHECK(reg2.inputs(1, 0) == 4);  // sample 0 is row 0 of the Fortran array: 1, 4
  CHECK(reg2.inputs(1, 2) == 6);
  CHECK(reg2.targets(1, 1) == 5);

  // The same from an .npz archive, under default and chosen names.
  const Bytes xb = npy_file("|u1", false, "(3, 2, 2)", pixels);
  const Bytes yb = npy_file("<i4", false, "(3,)", labels);
  const fs::path npz = dir.write("d.npz", zip_archive({stored("x.npy", xb), deflated("y.npy", yb), stored("x_test.npy", xb),
                                                      stored("y_test.npy", yb)}));
  const auto z = data::load_npz_dataset<float>(npz);
  CHECK(z.labels == d.labels);
  CHECK(z.inputs(1, 0) == 51);
  CHECK(z.name == npz.string() + ":x");
  const auto zt = data::load_npz_dataset<float>(npz, {"x_test", "y_test"}, o);
  CHECK(zt.inputs.isApprox(d.inputs));
  CHECK(zt.classes == 10);
}

TEST_CASE("load_npy_dataset: inconsistent arrays name the file and the byte") {
  Scratch dir;
  const fs::path x = dir.write("x.npy", npy_file("<f4", false, "(3, 2)", f4_values({1, 2, 3, 4, 5, 6})));
  const auto labels_of = [&](const char* name, std::string_view descr, std::string_view shape, const Bytes& values) {
    return dir.write(name, npy_file(descr, false, shape, values));
  };
  const auto fails = [&](const fs::path& inputs, const fs::path& labels, const data::ArrayDatasetOptions& o, std::uint64_t offset,
                         const char* message, const fs::path& file) {
    const DataError e = expect_data_error([&] { data::load_npy_dataset<float>(inputs, labels, o); });
    INFO(std::string(e.what()));
    CHECK(e.file() == file.string());
    CHECK(e.offset() == offset);
    CHECK(has(e.what(), message));
  };
  const data::ArrayDatasetOptions plain;
  const fs::path count = labels_of("count.npy", "<i8", "(2,)", i8_values({0, 1}));
  fails(x, count, plain, 8, "holds 2 entries (shape (2,)) but", count);
  const fs::path negative = labels_of("negative.npy", "<i8", "(3,)", i8_values({0, -1, 1}));
  fails(x, negative, plain, 128 + 8, "sample 1 has label -1", negative);
  data::ArrayDatasetOptions two;
  two.classes = 2;
  const fs::path big = labels_of("big.npy", "<i8", "(3,)", i8_values({0, 1, 2}));
  fails(x, big, two, 128 + 16, "sample 2 has label 2, outside [0, 2)", big);
  const fs::path huge = labels_of("huge.npy", "<u8", "(3,)", i8_values({0, 1, std::int64_t{1} << 40}));
  fails(x, huge, plain, 128 + 16, "sample 2 has label 1099511627776", huge);
  const fs::path floats = labels_of("floats.npy", "<f4", "(3,)", f4_values({0, 1, 1}));
  fails(x, floats, plain, 8, "labels must be integers, this array holds float32", floats);
  const fs::path wide = labels_of("wide.npy", "<i8", "(3, 2)", i8_values({0, 1, 1, 0, 0, 1}));
  fails(x, wide, plain, 8, "labels must have shape (samples) or (samples, 1), not (3, 2)", wide);
  const fs::path scalar = labels_of("scalar.npy", "<i8", "()", i8_values({1}));
  fails(x, scalar, plain, 8, "this array is a scalar", scalar);
  const fs::path good = labels_of("good.npy", "<i8", "(3,)", i8_values({0, 1, 1}));
  const fs::path nan_x = dir.write("nan.npy", npy_file("<f4", false, "(3, 2)", f4_values({1, 2, 3, std::nanf(""), 5, 6})));
  fails(nan_x, good, plain, 128 + 12, "sample 1, value 1 is nan", nan_x);
  data::ArrayDatasetOptions lenient;
  lenient.allow_non_finite = true;
  CHECK(std::isnan(data::load_npy_dataset<float>(nan_x, good, lenient).inputs(1, 1)));
  const fs::path empty_x = dir.write("empty.npy", npy_file("<f4", false, "(0, 2)", {}));
  fails(empty_x, labels_of("none.npy", "<i8", "(0,)", {}), plain, 8, "inputs hold no samples", empty_x);
  data::ArrayDatasetOptions reg;
  reg.kind = TargetKind::values;
  const fs::path inf_t = dir.write("inf.npy", npy_file("<f8", false, "(3,)", [] {
                                     Bytes b;
                                     for (const double v : {0.0, 1e300, 1.0}) put(b, std::bit_cast<std::uint64_t>(v), 8);
                                     return b;
                                   }()));
  fails(x, inf_t, reg, 128 + 8, "value 1 is inf as float", inf_t);  // 1e300 overflows float
  CHECK(data::load_npy_dataset<double>(x, inf_t, reg).targets(0, 1) == 1e300);
  data::ArrayDatasetOptions bad;
  bad.classes = std::size_t{1} << 31;
  CHECK(has(expect_error<ConfigError>([&] { data::load_npy_dataset<float>(x, good, bad); }), "classes must be below 2^31"));
  // A missing array in an archive names the archive.
  const fs::path npz = dir.write("d.npz", zip_archive({stored("inputs.npy", npy_file("<f4", false, "(3, 2)", f4_values({1, 2, 3, 4, 5, 6})))}));
  const DataError e = expect_data_error([&] { data::load_npz_dataset<float>(npz, {"inputs", "labels"}); });
  CHECK(has(e.what(), "no array 'labels' in the archive (it holds 'inputs')"));
}

// ================================================================================================
// CSV

TEST_CASE("csv: labels, targets, chosen features, quoting, delimiters, blank lines") {
  Scratch dir;
  const fs::path iris = dir.write("iris.csv",
                                  "\xEF\xBB\xBFsepal length,\"sepal, width\",\"say \"\"hi\"\"\",species\r\n"
                                  "5.1,3.5,1.4,0\r\n"
                                  "\r\n"
                                  "  4.9 , \"3.0\" ,+1.4e0,  2\r\n"
                                  "   \n"
                                  "-4.7,3.2,.5,1");  // no final newline
  data::CsvOptions o;
  o.label = "species";
  const auto d = data::load_csv_dataset<double>(iris, o);
  CHECK(d.size() == 3);
  CHECK(d.feature_size() == 3);
  CHECK(d.classes == 3);
  CHECK(d.labels == std::vector<std::int32_t>{0, 2, 1});
  CHECK(d.inputs(0, 0) == 5.1);
  CHECK(d.inputs(1, 1) == 3.0);
  CHECK(d.inputs(2, 1) == 1.4);
  CHECK(d.inputs(0, 2) == -4.7);
  CHECK(d.inputs(2, 2) == 0.5);
  CHECK(d.name == iris.string());
  CHECK_NOTHROW(d.validate());

  // Features chosen by name, in the order given; a column ignored; a header name with quotes.
  data::CsvOptions chosen = o;
  chosen.features = {"say \"hi\"", "sepal length"};
  chosen.classes = 5;
  const auto c = data::load_csv_dataset<float>(iris, chosen);
  CHECK(c.feature_size() == 2);
  CHECK(c.inputs(0, 1) == 1.4F);
  CHECK(c.inputs(1, 1) == 4.9F);
  CHECK(c.classes == 5);
  data::CsvOptions ignoring = o;
  ignoring.ignore = {"sepal, width"};
  CHECK(data::load_csv_dataset<float>(iris, ignoring).inputs.rows() == 2);

  // Regression with two targets, semicolons, class names.
  const fs::path reg = dir.write("reg.csv", "a;t1;b;t2\n1;10;2;20\n3;30;4;40\n");
  data::CsvOptions r;
  r.delimiter = ';';
  r.targets = {"t2", "t1"};
  const auto g = data::load_csv_dataset<float>(reg, r);
  CHECK(g.target_kind() == TargetKind::values);
  CHECK(g.targets.rows() == 2);
  CHECK(g.targets(0, 1) == 40);
  CHECK(g.targets(1, 1) == 30);
  CHECK(g.inputs(1, 0) == 2);
  CHECK_NOTHROW(g.validate());
  const fs::path named = dir.write("named.tsv", "x\ty\tkind\n1\t2\tcat\n3\t4\t\"dog\"\n5\t6\tcat\n");
  data::CsvOptions n;
  n.delimiter = '\t';
  n.label = "kind";
  n.class_names = {"dog", "cat"};
  const auto k = data::load_csv_dataset<float>(named, n);
  CHECK(k.labels == std::vector<std::int32_t>{1, 0, 1});
  CHECK(k.classes == 2);
  // Labels written as decimals ("2.0", as pandas writes an integer column with gaps) are integers.
  data::CsvOptions y;
  y.label = "y";
  const fs::path decimal = dir.write("decimal.csv", "x,y\n1,2.0\n2,0\n");
  CHECK(data::load_csv_dataset<float>(decimal, y).labels == std::vector<std::int32_t>{2, 0});
  // Values too small for float round to zero rather than fail; gzip files read as their text.
  CHECK(data::load_csv_dataset<float>(dir.write("tiny.csv", "x,y\n1e-60,1\n"), y).inputs(0, 0) == 0.0F);
  const std::string text = "x,y\n7,1\n";
  Bytes gz = {0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 0xFF};
  const Bytes body = deflate_stored(Bytes(text.begin(), text.end()));
  gz.insert(gz.end(), body.begin(), body.end());
  put(gz, crc32(text), 4);
  put(gz, text.size(), 4);
  CHECK(data::load_csv_dataset<float>(dir.write("z.csv.gz", gz), y).inputs(0, 0) == 7);
  // In memory.
  const std::string mem = "x,y\n1,0\n2,1\n";
  const auto m = data::parse_csv_dataset<float>("memory", std::span(reinterpret_cast<const std::uint8_t*>(mem.data()), mem.size()), y);
  CHECK(m.size() == 2);
  CHECK(m.inputs(0, 1) == 2);
}

TEST_CASE("csv: errors name the file, the line, the column and the text") {
  Scratch dir;
  data::CsvOptions o;
  o.label = "y";
  struct Case {
    const char* name;
    std::string text;
    std::uint64_t offset;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"empty", "", 0, "empty: no header row"},
      {"blank", "\n  \r\n\n", 0, "empty: no header row"},
      {"header only", "a,y\n", 3, "no data rows after the header"},
      {"not a number", "a,b,y\n1,2,0\n3,x4,1\n", 14, "line 3, column 2 (\"b\"): not a number: found \"x4\""},
      {"comma decimal", "a,y\n\"1,5\",0\n", 5, "line 2, column 1 (\"a\"): not a number: found \"1,5\""},
      {"empty field", "a,b,y\n1,,0\n", 8, "line 2, column 2 (\"b\"): empty field"},
      {"too few", "a,b,y\n1,2\n", 9, "line 2, column 3: 2 fields, the header names 3 columns"},
      {"too many", "a,b,y\n1,2,0,9\n", 12, "line 2, column 4: 4 fields, the header names 3 columns"},
      {"missing column", "a,b,z\n1,2,0\n", 0, "line 1 (the header): no column named \"y\" for the label (the columns are \"a\", \"b\", \"z\")"},
      {"negative label", "a,y\n1,-1\n", 6, "line 2, column 2 (\"y\"): a label must be a non-negative integer class number: found \"-1\""},
      {"fractional label", "a,y\n1,0.5\n", 6, "found \"0.5\""},
      {"text label", "a,y\n1,cat\n", 6, "found \"cat\" (for class names, give CsvOptions::class_names)"},
      {"nan", "a,y\n\nnan,1\n", 5, "line 3, column 1 (\"a\"): not a finite number: found \"nan\""},
      {"overflow", "a,y\n1e39,1\n", 4, "out of range for float: found \"1e39\""},
      {"open quote", "a,y\n\"1,0\n", 4, "line 2, column 1: the quoted field does not end on its line"},
      {"after quote", "a,y\n\"1\"x,0\n", 7, "line 2, column 1: text after the closing quote: found \"x,0\""},
      {"duplicate", "a,y,y\n1,0,1\n", 0, "columns 2 and 3 are both named \"y\""},
      {"unnamed", ",a,y\n0,1,1\n", 0, "column 1 has no name"},
      {"binary", std::string("a,y\n\x01\xff,0\n", 9), 4, "not a number: found \"\\x01\\xff\""},
  };
  for (const auto& c : cases) {
    INFO(std::string(c.name));
    const fs::path p = dir.write(std::string(c.name) + ".csv", c.text);
    const DataError e = expect_data_error([&] { data::load_csv_dataset<float>(p, o); });
    INFO(std::string(e.what()));
    CHECK(e.file() == p.string());
    CHECK(e.offset() == c.offset);
    CHECK(has(e.what(), c.message));
  }
  data::CsvOptions classes = o;
  classes.classes = 2;
  CHECK(has(expect_data_error([&] { data::load_csv_dataset<float>(dir.write("c.csv", "a,y\n1,2\n"), classes); }).what(),
            "label \"2\" is outside [0, 2)"));
  data::CsvOptions names = o;
  names.class_names = {"a", "b"};
  CHECK(has(expect_data_error([&] { data::load_csv_dataset<float>(dir.write("n.csv", "a,y\n1,c\n"), names); }).what(),
            "label \"c\" is not one of CsvOptions::class_names"));
  data::CsvOptions lenient = o;
  lenient.allow_non_finite = true;
  CHECK(std::isinf(data::load_csv_dataset<float>(dir.write("inf.csv", "a,y\n-inf,1\n"), lenient).inputs(0, 0)));
  data::CsvOptions index = o;
  index.ignore = {""};
  CHECK(data::load_csv_dataset<float>(dir.write("index.csv", ",a,y\n0,5,1\n"), index).inputs(0, 0) == 5);
  data::CsvOptions short_lines = o;
  short_lines.max_line_bytes = 8;
  CHECK(has(expect_data_error([&] { data::load_csv_dataset<float>(dir.write("long.csv", "a,y\n1234567890,1\n"), short_lines); }).what(),
            "line 2: longer than max_line_bytes = 8 bytes"));
  CHECK(has(expect_data_error([&] { data::load_csv_dataset<float>(dir.path / "absent.csv", o); }).what(), "cannot open"));

  // Options that cannot work.
  const fs::path ok = dir.write("ok.csv", "a,b,y\n1,2,0\n");
  const auto config = [&](const data::CsvOptions& bad) { return expect_error<ConfigError>([&] { data::load_csv_dataset<float>(ok, bad); }); };
  CHECK(has(config(data::CsvOptions{}), "name the label column"));
  data::CsvOptions both = o;
  both.targets = {"a"};
  CHECK(has(config(both), "not both"));
  data::CsvOptions twice = o;
  twice.features = {"a", "y"};
  CHECK(has(config(twice), "column \"y\" is chosen as the label and as a feature"));
  data::CsvOptions quote = o;
  quote.delimiter = '"';
  CHECK(has(config(quote), "delimiter"));
  data::CsvOptions none = o;
  none.ignore = {"a", "b"};
  CHECK(has(expect_data_error([&] { data::load_csv_dataset<float>(ok, none); }).what(), "no feature columns are left"));
}

// ================================================================================================
// In memory

TEST_CASE("from_rows: row-major arrays become a Dataset the trainer reads") {
  // 3 samples of 2 features, row by row, as a program holds them.
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  const std::vector<std::int32_t> y = {1, 0, 3};
  const auto d = data::from_rows<float>(x, 3, 2, y);
  CHECK(d.inputs.rows() == 2);
  CHECK(d.inputs.cols() == 3);
  CHECK(d.inputs(0, 1) == 3);
  CHECK(d.inputs(1, 2) == 6);
  CHECK(d.classes == 4);
  CHECK(d.labels == y);
  CHECK(d.name == "in-memory");
  CHECK_NOTHROW(d.validate());
  CHECK(data::from_rows<float>(x, 3, 2, y, 7, "mine").classes == 7);

  const std::vector<double> xd = {1, 2, 3, 4, 5, 6};
  const std::vector<double> t = {0.5, 1.5, 2.5, 3.5, 4.5, 5.5};
  const auto r = data::from_rows<double>(xd, 2, 3, t, 3, "reg");
  CHECK(r.targets.rows() == 3);
  CHECK(r.targets(2, 1) == 5.5);
  CHECK(r.inputs(0, 1) == 4);
  CHECK_NOTHROW(r.validate());

  CHECK(has(expect_error<ShapeError>([&] { data::from_rows<float>(x, 4, 2, y); }), "6 values are not 4 rows of 2"));
  CHECK(has(expect_error<ShapeError>([&] { data::from_rows<float>(x, 2, 3, y); }), "3 labels for 2 rows"));
  CHECK(has(expect_error<ShapeError>([&] { data::from_rows<float>(x, 0, 0, std::span<const std::int32_t>()); }), "at least one sample"));
  CHECK(has(expect_error<ConfigError>([&] { data::from_rows<float>(x, 3, 2, y, 3); }), "row 2 has label 3, outside [0, 3)"));
  const std::vector<std::int32_t> negative = {0, -2, 1};
  CHECK(has(expect_error<ConfigError>([&] { data::from_rows<float>(x, 3, 2, negative); }), "row 1 has label -2, which is negative"));
  std::vector<float> nan = x;
  nan[3] = std::numeric_limits<float>::quiet_NaN();
  CHECK(has(expect_error<ConfigError>([&] { data::from_rows<float>(nan, 3, 2, y); }), "values row 1, column 1 is nan"));
  CHECK(has(expect_error<ShapeError>([&] { data::from_rows<double>(xd, 2, 3, t, 2); }), "6 target values are not 2 rows of 2"));
}

// ================================================================================================
// Files written by NumPy itself: tests/unit/numpy_files.py writes them into $FLOTILLA_NUMPY_FILES
// and runs this case (skipped in a plain run, which has no such files).

TEST_CASE("numpy: files written by np.save, np.savez, np.savez_compressed and np.savetxt" * doctest::skip()) {
  const char* env = std::getenv("FLOTILLA_NUMPY_FILES");
  REQUIRE_MESSAGE(env != nullptr, "run by tests/unit/numpy_files.py, which sets FLOTILLA_NUMPY_FILES");
  const fs::path dir = env;
  // Every dtype in both orders, shape (4, 3, 2), values as value_of() gives them.
  int files = 0;
  for (const Dtype& t : dtypes) {
    for (const char* order : {"C", "F"}) {
      for (const char* endian : {"<", ">"}) {
        const fs::path p = dir / (std::string(t.code) + "_" + order + "_" + (endian[0] == '<' ? "le" : "be") + ".npy");
        if (!fs::exists(p)) continue;
        INFO(p.string());
        const data::NpyArray a = data::read_npy(p);
        CHECK(a.shape() == std::vector<std::size_t>{4, 3, 2});
        CHECK(a.fortran_order() == (order[0] == 'F'));
        const auto v = a.values<double>();
        bool all = true;
        for (std::size_t i = 0; i < v.size(); ++i) all = all && v[i] == value_of(t.kind, i);
        CHECK(all);
        ++files;
      }
    }
  }
  CHECK(files == 9 * 4 + 3 * 2);
  for (const int version : {1, 2, 3}) {
    const data::NpyArray a = data::read_npy(dir / ("version" + std::to_string(version) + ".npy"));
    CHECK(a.version() == version);
    CHECK(a.values<float>() == std::vector<float>{0, 1, 2, 3, 4, 5});
  }
  CHECK(data::read_npy(dir / "scalar.npy").at<double>(0) == 3.5);

  // Random values, with the raw float32 bytes alongside to compare with.
  const Bytes raw = data::read_file(dir / "random_f4.bin");
  std::vector<float> want(raw.size() / 4);
  std::memcpy(want.data(), raw.data(), raw.size());
  CHECK(data::read_npy(dir / "random.npy").values<float>() == want);
  const Bytes labels_raw = data::read_file(dir / "labels_i8.bin");
  std::vector<std::int32_t> labels(labels_raw.size() / 8);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int32_t>(labels_raw[8 * i]);
  for (const char* archive : {"savez.npz", "savez_compressed.npz"}) {
    INFO(std::string(archive));
    const auto d = data::load_npz_dataset<float>(dir / archive, {"x", "y"});
    REQUIRE(d.size() == 500);
    CHECK(d.feature_size() == 20);
    CHECK(std::equal(want.begin(), want.end(), d.inputs.data()));
    CHECK(d.labels == labels);
    CHECK(data::read_npz(dir / archive).array_names() == std::vector<std::string>{"x", "y", "arr_0"});
  }
  // np.savetxt with a header, '%.18e' features and '%d' labels: every double comes back exactly.
  const Bytes raw64 = data::read_file(dir / "table_f8.bin");
  std::vector<double> table(raw64.size() / 8);
  std::memcpy(table.data(), raw64.data(), raw64.size());
  data::CsvOptions o;
  o.label = "label";
  const auto c = data::load_csv_dataset<double>(dir / "savetxt.csv", o);
  REQUIRE(c.size() * 3 == table.size());
  CHECK(std::equal(table.begin(), table.end(), c.inputs.data()));
  CHECK(c.classes == 3);
}

}  // namespace unit_data_files
