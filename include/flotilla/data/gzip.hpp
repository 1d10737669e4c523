// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_DATA_GZIP_HPP_INCLUDED
#define FLOTILLA_DATA_GZIP_HPP_INCLUDED
// gunzip: a DEFLATE decoder (RFC 1951) and the gzip container around it (RFC 1952), so that reading
// the .gz files data sets ship as needs no zlib at link time.
//
// Input is untrusted: every malformed stream ends in a flotilla::DataError that names the file and
// the byte offset of the problem (in the compressed input), never in a crash, a hang or an
// allocation larger than the caller allowed. Output is capped by `max_output`; each loop either
// consumes input or produces output, so work is bounded by input size plus `max_output`. A caller
// that knows the format inside (an IDX file) passes an AnnouncedSize, and the output is then also
// capped by the size the content's own header announces, checked as the output is produced: a
// small file that inflates to gigabytes stops within a few hundred bytes of the announced size.
//
// Speed comes from table-driven Huffman decoding: the next 11 bits of the stream (8 for distances)
// index a table whose entry gives the symbol, its length in bits and its extra-bit count at once;
// the rare longer codes continue in a second-level table. The bit buffer is refilled with one 8-byte
// load, after which any length/distance pair (at most 48 bits) decodes without another refill.
#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "flotilla/core/crc32.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/linkage.hpp"

namespace flotilla::data {

/// Default cap on decompressed size: 4 GiB (less on 32-bit machines).
inline constexpr std::size_t default_max_output =
    static_cast<std::size_t>(std::min<std::uint64_t>(std::uint64_t{4} << 30, std::numeric_limits<std::size_t>::max() / 4));

/// The size that decompressed content announces for itself in its header (IDX: its dimensions).
/// `limit(output so far)` returns how many bytes the whole output may have: while the header is
/// incomplete, the size the header needs (it is called again once the output reaches that); once
/// the header is complete, the size it announces. It throws for a header no further bytes could
/// make valid, or for an announced size it refuses. Inflating stops with a DataError as soon as
/// the output would grow past an announced size that it has already reached.
struct AnnouncedSize {
  std::function<std::size_t(std::span<const std::uint8_t> output)> limit;
  /// What announces the size, as error messages name it ("IDX header").
  std::string announcer;
};

namespace detail {

// A decoding-table entry, packed in 32 bits so that the hot loop does one load per symbol:
//   bits 0-7   code length in bits (what to consume; at most 15, so bits 6-7 are zero)
//   bits 8-11  kind (below)
//   bits 12-15 number of extra bits that follow the code (lengths and distances)
//   bits 16-31 value: the literal byte, the base length or distance, or a sub-table's start
// The length sits alone in the low bits because consuming it is on the decoder's critical path:
// `buf >>= (e & 63)` is a single shift instruction, x86 and ARM shifts masking their count anyway.
inline constexpr std::uint32_t huff_literal = 0;  // also used for code-length symbols
inline constexpr std::uint32_t huff_base = 1;     // length or distance: value + extra bits
inline constexpr std::uint32_t huff_end = 2;      // end of block
inline constexpr std::uint32_t huff_sub = 3;      // continue in a sub-table
inline constexpr std::uint32_t huff_invalid = 4;  // no code, or a symbol that must not occur

inline constexpr std::uint32_t huff_entry(std::uint32_t value, std::uint32_t extra, std::uint32_t kind,
                                          std::uint32_t bits) noexcept {
  return value << 16 | extra << 12 | kind << 8 | bits;
}
inline constexpr std::uint32_t huff_bits(std::uint32_t e) noexcept { return e & 63U; }
inline constexpr std::uint32_t huff_kind(std::uint32_t e) noexcept { return (e >> 8) & 0xFU; }
inline constexpr std::uint32_t huff_extra(std::uint32_t e) noexcept { return (e >> 12) & 0xFU; }
inline constexpr std::uint32_t huff_value(std::uint32_t e) noexcept { return e >> 16; }

inline constexpr std::array<std::uint16_t, 29> length_base = {3,  4,  5,  6,  7,  8,  9,  10,  11,  13,
                                                              15, 17, 19, 23, 27, 31, 35, 43,  51,  59,
                                                              67, 83, 99, 115, 131, 163, 195, 227, 258};
inline constexpr std::array<std::uint8_t, 29> length_extra = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                                              2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
inline constexpr std::array<std::uint16_t, 30> distance_base = {
    1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
    193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
inline constexpr std::array<std::uint8_t, 30> distance_extra = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                                                6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
// The order in which a dynamic block lists the code lengths of the code-length alphabet.
inline constexpr std::array<std::uint8_t, 19> code_length_order = {16, 17, 18, 0, 8,  7, 9,  6, 10, 5,
                                                                   11, 4,  12, 3, 13, 2, 14, 1, 15};

enum class Alphabet { code_lengths, literal_length, distance };

/// What symbol `s` of an alphabet decodes to, without its code length.
inline constexpr std::uint32_t symbol_entry(Alphabet a, unsigned s) noexcept {
  switch (a) {
    case Alphabet::code_lengths:
      return huff_entry(s, 0, huff_literal, 0);
    case Alphabet::literal_length:
      if (s < 256) return huff_entry(s, 0, huff_literal, 0);
      if (s == 256) return huff_entry(0, 0, huff_end, 0);
      if (s < 286) return huff_entry(length_base[s - 257], length_extra[s - 257], huff_base, 0);
      break;  // 286 and 287 have fixed codes but must not occur
    case Alphabet::distance:
      if (s < 30) return huff_entry(distance_base[s], distance_extra[s], huff_base, 0);
      break;  // 30 and 31 likewise
  }
  return huff_entry(0, 0, huff_invalid, 0);
}

/// A two-level decoding table for a canonical Huffman code of at most MaxSymbols symbols and
/// MaxBits-bit codes. The first Primary bits of the stream (least significant first, as DEFLATE
/// packs them) index the primary table; a code longer than that finds a sub-table entry there and
/// continues with the next MaxBits - Primary bits. Every sub-table has the same size, so a code of
/// MaxSymbols symbols needs at most MaxSymbols of them and the storage is a fixed array.
template <unsigned Primary, unsigned MaxSymbols, unsigned MaxBits = 15>
struct HuffmanTable {
  static constexpr unsigned primary_bits = Primary;
  static constexpr unsigned sub_bits = MaxBits - Primary;
  static constexpr std::uint64_t primary_mask = (std::uint64_t{1} << Primary) - 1;
  static constexpr std::uint64_t sub_mask = (std::uint64_t{1} << sub_bits) - 1;

  std::array<std::uint32_t, (std::size_t{1} << Primary) + (sub_bits == 0 ? 0 : MaxSymbols << sub_bits)> entries{};

  /// Builds the table from per-symbol code lengths (0 = symbol unused). Returns nullptr, or what is
  /// wrong with the lengths. Like zlib, an incomplete code is accepted only when it is a single
  /// one-bit code (encoders emit those for a block that uses one distance), and a distance code may
  /// be empty (a block of literals only); unused bit patterns then decode as invalid.
  const char* build(const std::uint8_t* lengths, unsigned n, Alphabet alphabet) noexcept {
    std::array<unsigned, MaxBits + 1> count{};
    for (unsigned s = 0; s < n; ++s) {
      if (lengths[s] > MaxBits) return "has a code longer than allowed";
      ++count[lengths[s]];
    }
    count[0] = 0;
    long left = 1;  // code space left at the current length
    unsigned total = 0;
    for (unsigned len = 1; len <= MaxBits; ++len) {
      left = 2 * left - static_cast<long>(count[len]);
      if (left < 0) return "is over-subscribed (more codes than the code lengths allow)";
      total += count[len];
    }
    if (left > 0) {
      const bool single = total == 1 && count[1] == 1 && alphabet != Alphabet::code_lengths;
      const bool empty = total == 0 && alphabet == Alphabet::distance;
      if (!single && !empty) return total == 0 ? "has no codes" : "is incomplete (code lengths leave bit patterns unused)";
      std::fill(entries.begin(), entries.begin() + (std::size_t{1} << Primary), huff_entry(0, 0, huff_invalid, 0));
      if (total == 0) return nullptr;
    }
    // Symbols sorted by (length, symbol) receive consecutive canonical codes.
    std::array<unsigned, MaxBits + 2> offset{};
    for (unsigned len = 1; len <= MaxBits; ++len) offset[len + 1] = offset[len] + count[len];
    std::array<std::uint16_t, MaxSymbols> sorted{};
    for (unsigned s = 0; s < n; ++s)
      if (lengths[s] != 0) sorted[offset[lengths[s]]++] = static_cast<std::uint16_t>(s);

    unsigned code = 0;
    unsigned len = 1;
    unsigned current_prefix = ~0U;
    std::size_t sub_start = 0;
    std::size_t next_sub = std::size_t{1} << Primary;
    for (unsigned i = 0; i < total; ++i) {
      const unsigned s = sorted[i];
      const unsigned l = lengths[s];
      code <<= (l - len);
      len = l;
      // DEFLATE sends a code's most significant bit first into a least-significant-first stream,
      // so tables are indexed by the bit-reversed code.
      unsigned rev = 0;
      for (unsigned b = 0; b < l; ++b) rev |= ((code >> b) & 1U) << (l - 1 - b);
      const std::uint32_t e = symbol_entry(alphabet, s) | l;
      if (l <= Primary) {
        for (std::size_t j = rev; j < (std::size_t{1} << Primary); j += std::size_t{1} << l) entries[j] = e;
      } else {
        // Codes that share their first Primary bits are consecutive in canonical order, so one
        // sub-table is opened per prefix as the prefix changes.
        const unsigned prefix = rev & static_cast<unsigned>(primary_mask);
        if (prefix != current_prefix) {
          current_prefix = prefix;
          sub_start = next_sub;
          next_sub += std::size_t{1} << sub_bits;
          entries[prefix] = huff_entry(static_cast<std::uint32_t>(sub_start), 0, huff_sub, Primary);
        }
        for (std::size_t j = rev >> Primary; j < (std::size_t{1} << sub_bits); j += std::size_t{1} << (l - Primary))
          entries[sub_start + j] = e;
      }
      ++code;
    }
    return nullptr;
  }
};

using LiteralTable = HuffmanTable<11, 288>;
using DistanceTable = HuffmanTable<8, 32>;
using CodeLengthTable = HuffmanTable<7, 19, 7>;

struct FixedTables {
  LiteralTable literal;
  DistanceTable distance;
};

/// The fixed codes of block type 1, built once per program.
FLOTILLA_DECL const FixedTables& fixed_tables();

/// Bit-reader state, kept in a small value type so that the decoding loop can hold it in registers
/// (a copy in locals) rather than in memory that every output byte store might alias.
struct BitState {
  std::uint64_t buf = 0;  // bits not yet consumed, next bit lowest
  unsigned count = 0;     // how many bits of buf are valid
  std::size_t pos = 0;    // next input byte to load
  std::size_t pad = 0;    // zero bytes loaded past the end of input (valid only if never consumed)
};

inline std::uint64_t load_le64(const std::uint8_t* p) noexcept {
  // memcpy, not a shift-and-or loop: GCC does not merge the loop into one load.
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::big) {
    std::uint64_t r = 0;
    for (int i = 0; i < 8; ++i, v >>= 8) r = (r << 8) | (v & 0xFFU);
    v = r;
  }
  return v;
}
inline std::uint32_t load_le32(const std::uint8_t* p) noexcept {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}
inline std::uint32_t load_le16(const std::uint8_t* p) noexcept {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8;
}
FLOTILLA_DECL std::string hex32(std::uint32_t v);
/// Reads the gzip member header at input byte `pos` (magic, method, flags, and the optional extra
/// field, name, comment and header CRC) and returns the offset of its DEFLATE data.
FLOTILLA_DECL std::size_t gzip_header_end(std::span<const std::uint8_t> in, std::size_t pos, const std::string& name);

/// Inflates DEFLATE streams from one input buffer into one output vector. Several streams may be
/// inflated one after another into the same output (gzip members); each one's matches may reach
/// back only to its own start.
class Inflater {
 public:
  /// `announced`, when not null, must outlive the Inflater.
  FLOTILLA_DECL Inflater(std::span<const std::uint8_t> in, const std::string& name, std::vector<std::uint8_t>& out,
                         std::size_t max_output, const AnnouncedSize* announced = nullptr);

  /// Inflates the stream starting at input byte `start`, appending to the output, and returns the
  /// offset of the first input byte after the stream (its last byte is padded to a byte boundary).
  FLOTILLA_DECL std::size_t inflate(std::size_t start);

  // Inflating in steps, for output that is consumed as it is produced (GzipStream): begin() a
  // stream at input byte `start`, then step() until it returns true. Between steps the caller may
  // discard_front() output it no longer needs, keeping at least the last 32 KiB that matches may
  // reach back to; the output buffer then stays a fixed size whatever the stream's length.

  /// Starts the stream at input byte `start`; output continues after what is already there.
  FLOTILLA_DECL void begin(std::size_t start);
  /// Inflates until the output reaches `pause_at` bytes or the stream ends; returns whether it
  /// ended (then end_of_stream() gives where). A step that pauses stops at most one match (258
  /// bytes) or one stored block (65535 bytes) past `pause_at`.
  FLOTILLA_DECL bool step(std::size_t pause_at);
  /// After step() returned true: the offset of the first input byte after the stream.
  FLOTILLA_DECL std::size_t end_of_stream();
  /// Drops the first `n` bytes of output (at most size()); matches may still reach back to what is
  /// left. Not for an Inflater with an AnnouncedSize, which judges the output from its start.
  FLOTILLA_DECL void discard_front(std::size_t n);
  /// The input offset that inflating has read up to (bytes before it are no longer needed).
  std::size_t input_position() const noexcept { return bits_.pos; }

  /// Bytes of output so far. The output vector itself is larger (spare capacity) until finish().
  std::size_t size() const noexcept { return op_; }
  const std::uint8_t* data() const noexcept { return out_.data(); }
  void finish() { out_.resize(op_); }

  /// Throws DataError for input offset `offset`.
  [[noreturn]] void fail_at(std::size_t offset, const std::string& what) const { throw DataError(name_, offset, what); }

  /// Capacity for `need` more bytes beyond the output so far (need <= max_output - size() + 2 * slack).
  FLOTILLA_DECL void reserve(std::size_t need);

  // Spare room beyond a match so that it may be copied in 8-byte steps past its end.
  static constexpr std::size_t slack = 258 + 8;

 private:
  // Offset of the byte holding the next unconsumed bit; the input size once the stream has been read
  // past its end.
  std::size_t offset_of(const BitState& b) const noexcept {
    if (b.count < 8 * b.pad) return n_;
    return (8 * b.pos - (b.count - 8 * b.pad)) / 8;
  }
  // Zero bits read past the end decode as something, often as nonsense: if any were consumed, the
  // real problem is that the data ended early.
  [[noreturn]] void fail(BitState b, const std::string& what) const {
    if (b.count < 8 * b.pad) truncated();
    fail_at(offset_of(b), what);
  }
  [[noreturn]] void truncated() const { fail_at(n_, "truncated: the compressed data ends inside a DEFLATE block"); }
  [[noreturn]] FLOTILLA_DECL void too_large() const;
  [[noreturn]] FLOTILLA_DECL void past_announced(std::size_t announced) const;

  /// The slow path of every write that would end past `limit_` (at output size `end`): refuses one
  /// past `max_output`, and otherwise asks the AnnouncedSize for the next limit once the output has
  /// reached the current one. A write that starts below the limit goes through (one match or one
  /// stored block: at most 65535 bytes over it), since the header it completes is needed to know
  /// the next limit. Reserves room for the output up to the new limit.
  FLOTILLA_DECL void check_limit(std::size_t end);
  /// At the end of a stream: the last write may have gone past a limit with no write after it to
  /// ask about it, so the AnnouncedSize judges the output once more.
  FLOTILLA_DECL void check_final_size();

  /// Refills to at least 56 valid bits. Past the end of input it shifts in zero bytes and counts
  /// them: a stream may end within the last byte, so reading ahead is fine, but consuming a padding
  /// bit means the stream was cut short.
  FLOTILLA_DECL BitState refill(BitState b) const;

  std::uint32_t read_bits(unsigned k) {
    if (bits_.count < k) bits_ = refill(bits_);
    const auto v = static_cast<std::uint32_t>(bits_.buf & ((std::uint64_t{1} << k) - 1));
    bits_.buf >>= k;
    bits_.count -= k;
    return v;
  }

  /// Skips to the next byte boundary and hands back the bytes the bit buffer read ahead; returns the
  /// input offset of the next unread byte.
  FLOTILLA_DECL std::size_t align_to_byte();

  FLOTILLA_DECL void stored_block();
  FLOTILLA_DECL void dynamic_header();
  /// Decodes a Huffman-coded block until its end (returns true) or until the output reaches
  /// pause_ (returns false, to be called again with the same tables).
  FLOTILLA_DECL bool huffman_block(const std::uint32_t* lit, const std::uint32_t* dist);

  // Where step() is: between blocks, or inside a block of fixed or dynamic codes.
  enum class Block : std::uint8_t { none, fixed, dynamic };

  const std::uint8_t* in_;
  std::size_t n_;
  const std::string& name_;
  std::vector<std::uint8_t>& out_;
  std::size_t max_output_;
  const AnnouncedSize* announced_;
  // Output size at which check_limit() must be consulted: max_output_ without an AnnouncedSize.
  std::size_t limit_;
  std::size_t op_ = 0;
  std::size_t stream_start_ = 0;
  // Output size at which huffman_block() returns to step()'s caller; never reached by inflate().
  std::size_t pause_ = std::numeric_limits<std::size_t>::max() / 4;
  Block block_ = Block::none;
  bool final_ = false;
  BitState bits_;
  LiteralTable literals_;
  DistanceTable distances_;
  CodeLengthTable code_lengths_;
};

}  // namespace detail

/// Decompresses a raw DEFLATE stream (RFC 1951, no zlib or gzip wrapper) that fills `in` exactly.
/// Throws DataError naming `name_for_errors` and the offending byte offset when the stream is
/// malformed, truncated, followed by more bytes, or decompresses to more than `max_output` bytes.
FLOTILLA_DECL std::vector<std::uint8_t> inflate_raw(std::span<const std::uint8_t> in, const std::string& name_for_errors,
                                                    std::size_t max_output = default_max_output);

/// Whether `in` starts with the gzip magic bytes 1f 8b.
inline bool is_gzip(std::span<const std::uint8_t> in) noexcept {
  return in.size() >= 2 && in[0] == 0x1F && in[1] == 0x8B;
}

/// Decompresses gzip data (RFC 1952): one or more members, each with its header (FEXTRA, FNAME,
/// FCOMMENT and FHCRC are read and checked), DEFLATE body, CRC-32 and size. Zero bytes after the last
/// member are accepted as padding, as gzip(1) does; anything else there is an error. Throws
/// DataError naming `name_for_errors` and the byte offset of the problem.
FLOTILLA_DECL std::vector<std::uint8_t> gunzip(std::span<const std::uint8_t> in, const std::string& name_for_errors,
                                               std::size_t max_output = default_max_output);

/// gunzip() of content that announces its own size (an IDX header's dimensions): decompressing
/// also stops with a DataError, at the compressed offset reached, as soon as the output grows
/// past that size, so memory and time stay proportional to the announced size; the `announced`
/// callback's own errors (a malformed or refused header) pass through unchanged.
FLOTILLA_DECL std::vector<std::uint8_t> gunzip(std::span<const std::uint8_t> in, const std::string& name_for_errors,
                                               std::size_t max_output, const AnnouncedSize& announced);

#if FLOTILLA_IMPLEMENTATION
namespace detail {

FLOTILLA_DECL const FixedTables& fixed_tables() {
  static const std::unique_ptr<const FixedTables> tables = [] {
    auto t = std::make_unique<FixedTables>();
    std::array<std::uint8_t, 288> lit{};
    std::fill(lit.begin(), lit.begin() + 144, std::uint8_t{8});
    std::fill(lit.begin() + 144, lit.begin() + 256, std::uint8_t{9});
    std::fill(lit.begin() + 256, lit.begin() + 280, std::uint8_t{7});
    std::fill(lit.begin() + 280, lit.end(), std::uint8_t{8});
    std::array<std::uint8_t, 32> dist{};
    dist.fill(5);
    t->literal.build(lit.data(), 288, Alphabet::literal_length);
    t->distance.build(dist.data(), 32, Alphabet::distance);
    return std::unique_ptr<const FixedTables>(std::move(t));
  }();
  return *tables;
}

FLOTILLA_DECL std::string hex32(std::uint32_t v) {
  std::string s = "0x00000000";
  for (int i = 9; i >= 2; --i, v >>= 4) s[static_cast<std::size_t>(i)] = "0123456789abcdef"[v & 0xFU];
  return s;
}

FLOTILLA_DECL Inflater::Inflater(std::span<const std::uint8_t> in, const std::string& name, std::vector<std::uint8_t>& out,
                                 std::size_t max_output, const AnnouncedSize* announced)
    : in_(in.data()),
      n_(in.size()),
      name_(name),
      out_(out),
      // Leaves headroom so that max_output + slack (and output size + a write's length) never
      // overflows.
      max_output_(std::min(max_output, std::numeric_limits<std::size_t>::max() / 2)),
      announced_(announced && announced->limit ? announced : nullptr),
      limit_(max_output_) {
  out_.clear();
  if (announced_) limit_ = std::min(announced_->limit(std::span<const std::uint8_t>()), max_output_);
}

FLOTILLA_DECL std::size_t Inflater::inflate(std::size_t start) {
  begin(start);
  while (!step(std::numeric_limits<std::size_t>::max() / 4)) {
  }
  return end_of_stream();
}

FLOTILLA_DECL void Inflater::begin(std::size_t start) {
  bits_ = BitState{0, 0, start, 0};
  stream_start_ = op_;
  block_ = Block::none;
  final_ = false;
}

FLOTILLA_DECL bool Inflater::step(std::size_t pause_at) {
  pause_ = pause_at;
  for (;;) {
    if (block_ == Block::fixed || block_ == Block::dynamic) {
      // huffman_block() needs op_ < pause_ on entry (its room check relies on it).
      if (op_ >= pause_) return false;
      const FixedTables& f = fixed_tables();
      const bool done = block_ == Block::fixed ? huffman_block(f.literal.entries.data(), f.distance.entries.data())
                                               : huffman_block(literals_.entries.data(), distances_.entries.data());
      if (!done) return false;
      block_ = Block::none;
    }
    if (final_) {
      check_final_size();
      return true;
    }
    if (op_ >= pause_) return false;
    final_ = read_bits(1) != 0;
    const std::uint32_t type = read_bits(2);
    if (type == 0) {
      stored_block();
    } else if (type == 1) {
      block_ = Block::fixed;
    } else if (type == 2) {
      dynamic_header();
      block_ = Block::dynamic;
    } else {
      fail(bits_, "invalid DEFLATE block type 3 (reserved)");
    }
  }
}

FLOTILLA_DECL std::size_t Inflater::end_of_stream() { return align_to_byte(); }

FLOTILLA_DECL void Inflater::discard_front(std::size_t n) {
  n = std::min(n, op_);
  if (n == 0) return;
  std::memmove(out_.data(), out_.data() + n, op_ - n);
  op_ -= n;
  stream_start_ = stream_start_ > n ? stream_start_ - n : 0;
}

FLOTILLA_DECL void Inflater::reserve(std::size_t need) {
  if (out_.size() - op_ >= need) return;
  const std::size_t limit = max_output_ + slack;
  std::size_t want = std::max<std::size_t>(std::min(out_.size(), limit / 2) * 2, std::size_t{1} << 16);
  want = std::max(std::min(want, limit), op_ + need);
  out_.resize(want);
}

[[noreturn]] FLOTILLA_DECL void Inflater::too_large() const {
  if (bits_.count < 8 * bits_.pad) truncated();
  fail_at(offset_of(bits_), "decompressed data exceeds the maximum of " + std::to_string(max_output_) +
                                " bytes allowed (pass a larger max_output if this file is genuine)");
}

[[noreturn]] FLOTILLA_DECL void Inflater::past_announced(std::size_t announced) const {
  if (bits_.count < 8 * bits_.pad) truncated();
  fail_at(offset_of(bits_), "the data inflates past the " + std::to_string(announced) + " bytes its " + announced_->announcer +
                                " announces (" + std::to_string(op_) + " bytes inflated by this offset)");
}

FLOTILLA_DECL void Inflater::check_limit(std::size_t end) {
  if (end > max_output_) too_large();
  if (!announced_ || op_ < limit_) return;
  const std::size_t announced = announced_->limit(std::span<const std::uint8_t>(out_.data(), op_));
  if (announced <= op_) past_announced(announced);
  limit_ = std::min(announced, max_output_);
  // Room for one write that starts below the limit and the slack after it, so that going past the
  // limit is found by the next check rather than by a doubling of the buffer.
  reserve(limit_ - op_ + 2 * slack);
}

FLOTILLA_DECL void Inflater::check_final_size() {
  if (!announced_ || op_ < limit_) return;
  const std::size_t announced = announced_->limit(std::span<const std::uint8_t>(out_.data(), op_));
  if (announced < op_) past_announced(announced);
  limit_ = std::min(announced, max_output_);
}

FLOTILLA_DECL std::size_t gzip_header_end(std::span<const std::uint8_t> in, std::size_t pos, const std::string& name) {
  const std::size_t n = in.size();
  const std::uint8_t* p = in.data();
  const std::size_t member = pos;
  if ((n - pos >= 1 && p[pos] != 0x1F) || (n - pos >= 2 && p[pos + 1] != 0x8B))
    throw DataError(name, pos, "not gzip data (the magic bytes are not 1f 8b)");
  if (n - pos < 10) throw DataError(name, n, "truncated: the data ends inside a gzip header");
  if (p[pos + 2] != 8)
    throw DataError(name, pos + 2, "unsupported gzip compression method " + std::to_string(p[pos + 2]) + " (only 8, DEFLATE, exists)");
  const std::uint8_t flags = p[pos + 3];
  if (flags & 0xE0U) throw DataError(name, pos + 3, "gzip header has reserved flag bits set");
  pos += 10;
  if (flags & 0x04U) {  // FEXTRA
    if (n - pos < 2) throw DataError(name, n, "truncated: the data ends inside the gzip extra field");
    const std::size_t xlen = detail::load_le16(p + pos);
    pos += 2;
    if (n - pos < xlen) throw DataError(name, n, "truncated: the data ends inside the gzip extra field");
    pos += xlen;
  }
  for (const std::uint8_t field : {std::uint8_t{0x08}, std::uint8_t{0x10}}) {  // FNAME, FCOMMENT
    if (!(flags & field)) continue;
    const auto* zero = static_cast<const std::uint8_t*>(std::memchr(p + pos, 0, n - pos));
    if (zero == nullptr)
      throw DataError(name, n, std::string("truncated: the data ends inside the gzip ") + (field == 0x08 ? "file name" : "comment"));
    pos = static_cast<std::size_t>(zero - p) + 1;
  }
  if (flags & 0x02U) {  // FHCRC: the low 16 bits of the CRC-32 of the header before it
    if (n - pos < 2) throw DataError(name, n, "truncated: the data ends inside the gzip header CRC");
    const std::uint32_t want = detail::load_le16(p + pos);
    const std::uint32_t got = crc32(in.subspan(member, pos - member)) & 0xFFFFU;
    if (want != got) throw DataError(name, pos, "gzip header CRC mismatch");
    pos += 2;
  }
  return pos;
}

FLOTILLA_DECL BitState Inflater::refill(BitState b) const {
  if (n_ - b.pos >= 8) {
    // One load adds as many whole bytes as fit; the bits of a partly added byte above `count` are
    // the same ones the next refill ORs in again.
    b.buf |= load_le64(in_ + b.pos) << b.count;
    b.pos += (63 - b.count) >> 3;
    b.count |= 56;
    return b;
  }
  if (b.count < 8 * b.pad) truncated();
  while (b.count < 56) {
    if (b.pos < n_) {
      b.buf |= static_cast<std::uint64_t>(in_[b.pos++]) << b.count;
    } else {
      ++b.pad;
    }
    b.count += 8;
  }
  return b;
}

FLOTILLA_DECL std::size_t Inflater::align_to_byte() {
  BitState b = bits_;
  const unsigned drop = b.count & 7U;
  b.buf >>= drop;
  b.count -= drop;
  if (b.count < 8 * b.pad) truncated();
  const std::size_t pos = b.pos - (b.count / 8 - b.pad);
  bits_ = BitState{0, 0, pos, 0};
  return pos;
}

FLOTILLA_DECL void Inflater::stored_block() {
  std::size_t p = align_to_byte();
  if (n_ - p < 4) fail_at(n_, "truncated: the compressed data ends inside a stored block's header");
  const std::uint32_t len = load_le16(in_ + p);
  const std::uint32_t nlen = load_le16(in_ + p + 2);
  if (len != (~nlen & 0xFFFFU)) fail_at(p, "stored block length " + std::to_string(len) + " does not match its complement");
  p += 4;
  if (n_ - p < len)
    fail_at(n_, "truncated: a stored block of " + std::to_string(len) + " bytes has only " + std::to_string(n_ - p) + " left");
  if (op_ + len > limit_) {
    bits_.pos = p;
    check_limit(op_ + len);
  }
  reserve(len);
  if (len != 0) std::memcpy(out_.data() + op_, in_ + p, len);
  op_ += len;
  bits_.pos = p + len;
}

FLOTILLA_DECL void Inflater::dynamic_header() {
  const unsigned hlit = read_bits(5) + 257;
  const unsigned hdist = read_bits(5) + 1;
  const unsigned hclen = read_bits(4) + 4;
  if (hlit > 286) fail(bits_, "dynamic block declares " + std::to_string(hlit) + " literal/length codes (at most 286)");
  if (hdist > 30) fail(bits_, "dynamic block declares " + std::to_string(hdist) + " distance codes (at most 30)");
  std::array<std::uint8_t, 19> cl_lengths{};
  for (unsigned i = 0; i < hclen; ++i) cl_lengths[code_length_order[i]] = static_cast<std::uint8_t>(read_bits(3));
  if (const char* why = code_lengths_.build(cl_lengths.data(), 19, Alphabet::code_lengths))
    fail(bits_, std::string("invalid dynamic block: the code-length code ") + why);

  std::array<std::uint8_t, 286 + 30> lengths{};
  const unsigned total = hlit + hdist;
  unsigned i = 0;
  while (i < total) {
    if (bits_.count < 14) bits_ = refill(bits_);  // a 7-bit code and up to 7 extra bits
    const std::uint32_t e = code_lengths_.entries[bits_.buf & CodeLengthTable::primary_mask];
    if (huff_kind(e) != huff_literal) fail(bits_, "invalid code-length code");
    bits_.buf >>= huff_bits(e);
    bits_.count -= huff_bits(e);
    const std::uint32_t sym = huff_value(e);
    if (sym < 16) {
      lengths[i++] = static_cast<std::uint8_t>(sym);
      continue;
    }
    std::uint8_t value = 0;
    unsigned repeat = 0;
    if (sym == 16) {
      if (i == 0) fail(bits_, "invalid dynamic block: code length repeat (16) with no previous length");
      value = lengths[i - 1];
      repeat = 3 + read_bits(2);
    } else if (sym == 17) {
      repeat = 3 + read_bits(3);
    } else {
      repeat = 11 + read_bits(7);
    }
    if (repeat > total - i)
      fail(bits_, "invalid dynamic block: code length repeat runs past the " + std::to_string(total) + " lengths declared");
    std::fill_n(lengths.begin() + i, repeat, value);
    i += repeat;
  }
  if (lengths[256] == 0) fail(bits_, "invalid dynamic block: no code for end-of-block");
  if (const char* why = literals_.build(lengths.data(), hlit, Alphabet::literal_length))
    fail(bits_, std::string("invalid dynamic block: the literal/length code ") + why);
  if (const char* why = distances_.build(lengths.data() + hlit, hdist, Alphabet::distance))
    fail(bits_, std::string("invalid dynamic block: the distance code ") + why);
}

FLOTILLA_DECL bool Inflater::huffman_block(const std::uint32_t* lit, const std::uint32_t* dist) {
  // Locals, not members: stores through `out` (a byte pointer, which may alias anything) would
  // otherwise force every member to be reloaded after each output byte.
  BitState b = bits_;
  const std::uint8_t* const in = in_;
  const std::size_t n = n_;
  std::size_t limit = limit_;
  const std::size_t stream_start = stream_start_;
  std::uint8_t* out = out_.data();
  // The room check below doubles as the pause check: with `cap` at most pause_ + slack, it fires
  // once op reaches pause_ (op < pause_ on entry, and one symbol adds at most 258 < slack bytes).
  const std::size_t pause = pause_;
  std::size_t cap = std::min(out_.size(), pause + slack);
  std::size_t op = op_;
  for (;;) {
    if (b.count < 48) {  // enough for a length code, its extra bits, a distance code and its extra bits
      if (n - b.pos >= 8) {
        b.buf |= load_le64(in + b.pos) << b.count;
        b.pos += (63 - b.count) >> 3;
        b.count |= 56;
      } else {
        b = refill(b);
      }
    }
    if (cap - op < slack) {
      op_ = op;
      if (op >= pause) {
        bits_ = b;
        return false;
      }
      reserve(slack);
      out = out_.data();
      cap = std::min(out_.size(), pause + slack);
    }
    std::uint32_t e = lit[b.buf & LiteralTable::primary_mask];
    if (huff_kind(e) == huff_sub) e = lit[huff_value(e) + ((b.buf >> LiteralTable::primary_bits) & LiteralTable::sub_mask)];
    b.buf >>= huff_bits(e);
    b.count -= huff_bits(e);
    const std::uint32_t kind = huff_kind(e);
    if (kind == huff_literal) {
      if (op >= limit) {
        bits_ = b;
        op_ = op;
        check_limit(op + 1);
        limit = limit_;
        out = out_.data();
        cap = std::min(out_.size(), pause + slack);
      }
      out[op++] = static_cast<std::uint8_t>(huff_value(e));
      continue;
    }
    if (kind != huff_base) {
      if (kind == huff_end) break;
      fail(b, "invalid literal/length code");
    }
    std::uint32_t extra = huff_extra(e);
    const std::size_t length = huff_value(e) + static_cast<std::size_t>(b.buf & ((std::uint64_t{1} << extra) - 1));
    b.buf >>= extra;
    b.count -= extra;

    e = dist[b.buf & DistanceTable::primary_mask];
    if (huff_kind(e) == huff_sub) e = dist[huff_value(e) + ((b.buf >> DistanceTable::primary_bits) & DistanceTable::sub_mask)];
    b.buf >>= huff_bits(e);
    b.count -= huff_bits(e);
    if (huff_kind(e) != huff_base) fail(b, "invalid distance code");
    extra = huff_extra(e);
    const std::size_t distance = huff_value(e) + static_cast<std::size_t>(b.buf & ((std::uint64_t{1} << extra) - 1));
    b.buf >>= extra;
    b.count -= extra;

    if (distance > op - stream_start)
      fail(b, "invalid distance " + std::to_string(distance) + ": too far back (only " + std::to_string(op - stream_start) +
                  " bytes decompressed so far)");
    if (op + length > limit) {
      bits_ = b;
      op_ = op;
      check_limit(op + length);
      limit = limit_;
      out = out_.data();
      cap = std::min(out_.size(), pause + slack);
    }
    std::uint8_t* dst = out + op;
    const std::uint8_t* src = dst - distance;
    if (distance >= 8) {
      // Copies whole 8-byte words, possibly past the match's end into the slack: each word's
      // source lies entirely before its destination, so overlapping matches still come out right.
      std::uint8_t* const end = dst + length;
      do {
        std::memcpy(dst, src, 8);
        dst += 8;
        src += 8;
      } while (dst < end);
    } else if (distance == 1) {
      std::memset(dst, *src, length);
    } else {
      for (std::size_t k = 0; k < length; ++k) dst[k] = src[k];
    }
    op += length;
  }
  bits_ = b;
  op_ = op;
  return true;
}

}  // namespace detail

FLOTILLA_DECL std::vector<std::uint8_t> inflate_raw(std::span<const std::uint8_t> in, const std::string& name_for_errors,
                                                    std::size_t max_output) {
  std::vector<std::uint8_t> out;
  auto inflater = std::make_unique<detail::Inflater>(in, name_for_errors, out, max_output);
  const std::size_t end = inflater->inflate(0);
  if (end != in.size())
    inflater->fail_at(end, std::to_string(in.size() - end) + " bytes of trailing data after the end of the DEFLATE stream");
  inflater->finish();
  return out;
}

FLOTILLA_DECL std::vector<std::uint8_t> gunzip(std::span<const std::uint8_t> in, const std::string& name_for_errors,
                                               std::size_t max_output) {
  return gunzip(in, name_for_errors, max_output, AnnouncedSize{});
}

FLOTILLA_DECL std::vector<std::uint8_t> gunzip(std::span<const std::uint8_t> in, const std::string& name_for_errors,
                                               std::size_t max_output, const AnnouncedSize& announced) {
  const std::string& name = name_for_errors;
  const std::size_t n = in.size();
  const std::uint8_t* p = in.data();
  std::vector<std::uint8_t> out;
  auto inflater = std::make_unique<detail::Inflater>(in, name, out, max_output, &announced);
  // With an announced size the output is sized from that once the header is read, not from the
  // trailer, whose size field may be forged.
  if (n >= 18 && !announced.limit) {
    // The last member's size field sizes the output up front when the file has one member, the
    // common case. It is only a hint, and capped at 32 times the input (growth by doubling takes
    // over beyond that), so a forged one cannot force a large allocation.
    const std::size_t hint = std::min<std::size_t>(
        {detail::load_le32(p + n - 4), max_output, n > std::numeric_limits<std::size_t>::max() / 64 ? n : n * 32});
    inflater->reserve(hint + detail::Inflater::slack);
  }

  std::size_t pos = 0;
  for (;;) {
    pos = detail::gzip_header_end(in, pos, name);
    const std::size_t start = inflater->size();
    pos = inflater->inflate(pos);
    const std::size_t size = inflater->size() - start;
    if (n - pos < 8) throw DataError(name, n, "truncated: the data ends before the gzip trailer (CRC-32 and size)");
    const std::uint32_t want_crc = detail::load_le32(p + pos);
    const std::uint32_t got_crc = crc32(std::span<const std::uint8_t>(inflater->data() + start, size));
    if (want_crc != got_crc)
      throw DataError(name, pos, "CRC-32 mismatch: the trailer says " + detail::hex32(want_crc) + ", the data gives " +
                                     detail::hex32(got_crc) + " (corrupt data)");
    const std::uint32_t want_size = detail::load_le32(p + pos + 4);
    if (want_size != static_cast<std::uint32_t>(size))
      throw DataError(name, pos + 4, "size mismatch: trailer says " + std::to_string(want_size) + " bytes (mod 2^32), data has " +
                                         std::to_string(size));
    pos += 8;

    if (pos == n) break;
    if (p[pos] == 0x1F && (n - pos == 1 || p[pos + 1] == 0x8B)) continue;  // another member, maybe cut short
    if (std::all_of(p + pos, p + n, [](std::uint8_t c) { return c == 0; })) break;
    throw DataError(name, pos, std::to_string(n - pos) + " bytes of trailing garbage after the last gzip member");
  }
  inflater->finish();
  return out;
}
#endif  // FLOTILLA_IMPLEMENTATION

}  // namespace flotilla::data
#endif  // FLOTILLA_DATA_GZIP_HPP_INCLUDED
