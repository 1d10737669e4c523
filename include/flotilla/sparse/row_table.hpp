// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_SPARSE_ROWTABLE_HPP_INCLUDED
#define FLOTILLA_SPARSE_ROWTABLE_HPP_INCLUDED
// One shard of an embedding table: the rows a parameter server owns, created on first touch.
//
// A table of millions of rows is touched a few thousand rows at a time, so rows exist only once a
// key has been pulled or pushed. A row's initial values are a function of (seed, table id, key)
// alone: whatever the number of servers, and whichever server or worker touches a key first, the
// row starts the same, so runs with different layouts can be compared row by row.
//
// Storage: a hash map from key to slot, and the values, optimizer state, update counts and keys of
// the slots in contiguous slabs (chunks of rows, allocated as the table grows; a row never moves).
// Memory is counted (slab bytes plus an estimate of the map's nodes and buckets) and may be bounded
// per shard: the row that would pass the bound is refused with an Error that names the table, the
// shard, the rows held and the bound, rather than the process dying of it.
//
// A shard file (save/load), little-endian:
//   magic "FLROWS01" (8) | version u32 | table id u32 | dim u64 | state size u64 | rows u64 |
//   updates u64 | rows in key order: key u64, values f32 * dim, state f32 * state size, updates u64 |
//   CRC-32 u32 of every byte before it.
// It is written to "<path>.tmp" and renamed over <path>, so a crash leaves the old file whole.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "flotilla/codec/little_endian.hpp"
#include "flotilla/concepts/row_optimizer.hpp"
#include "flotilla/core/crc32.hpp"
#include "flotilla/core/detail/key_map.hpp"
#include "flotilla/core/detail/prefetch.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/core/tensor.hpp"

namespace flotilla::sparse {

/// What a table is: its name (for messages), the width of a row, how its rows start (uniform in
/// [-init_scale, init_scale], from a hash of (seed, id, key)), its id (which also tells tables
/// apart in the initial values) and the most bytes one shard may hold (0: no bound).
struct TableSpec {
  std::string name;
  std::size_t dim = 0;
  float init_scale = 0.0f;
  std::uint64_t seed = 0;
  std::uint32_t id = 0;
  std::size_t max_bytes_per_shard = 0;
};

/// The server (of `servers`) that owns `key`. Keys are often hashes already, but may also be small
/// bucket numbers: they are mixed again so that consecutive keys spread over the servers.
inline std::size_t owner_of(std::uint64_t key, std::size_t servers) {
  if (servers == 0) throw ConfigError("sparse::owner_of: no servers to own key " + std::to_string(key));
  return static_cast<std::size_t>(flotilla::detail::mix(key, 0x6a09e667f3bcc909ULL) % servers);
}

/// The initial value of element `i` of the row for `key`, uniform in [-scale, scale).
inline float initial_row_value(std::uint64_t seed, std::uint32_t table_id, std::uint64_t key, std::size_t i,
                               float scale) noexcept {
  const std::uint64_t row = flotilla::detail::mix(flotilla::detail::mix(seed, 0x243f6a8885a308d3ULL ^ table_id), key);
  const std::uint64_t bits = flotilla::detail::mix(row, static_cast<std::uint64_t>(i));
  return scale * (2.0f * bits_to_unit<float>(bits) - 1.0f);
}

namespace detail {

inline constexpr char row_file_magic[8] = {'F', 'L', 'R', 'O', 'W', 'S', '0', '1'};
inline constexpr std::uint32_t row_file_version = 1;
inline constexpr std::size_t row_file_header_size = 8 + 4 + 4 + 8 + 8 + 8 + 8;

/// A table shard whatever its optimizer: what a server holding several tables needs.
class RowTableBase {
 public:
  virtual ~RowTableBase() = default;
  RowTableBase() = default;
  RowTableBase(const RowTableBase&) = delete;
  RowTableBase& operator=(const RowTableBase&) = delete;

  virtual const TableSpec& spec() const noexcept = 0;
  virtual std::size_t dim() const noexcept = 0;
  virtual std::size_t state_size() const noexcept = 0;
  virtual std::size_t rows() const noexcept = 0;
  virtual std::size_t bytes() const noexcept = 0;
  virtual std::uint64_t updates() const noexcept = 0;
  /// Copies the rows of `keys` into `out` (keys.size() * dim, row-major), creating missing rows.
  virtual void gather(std::span<const std::uint64_t> keys, std::span<float> out) = 0;
  /// As gather, but a key without a row gets the values its row would start with, and no row.
  virtual void peek(std::span<const std::uint64_t> keys, std::span<float> out) = 0;
  /// One optimizer step on each row of `keys` with its gradient (row-major), then updates() + 1.
  virtual void apply(std::span<const std::uint64_t> keys, std::span<const float> gradients) = 0;
  virtual void save(const std::string& path) const = 0;
  virtual void load(const std::string& path) = 0;
  /// Every row in key order: key, values, optimizer state, the updates it received.
  virtual void for_each_row(
      const std::function<void(std::uint64_t, std::span<const float>, std::span<const float>, std::uint64_t)>& f)
      const = 0;
};

}  // namespace detail

/// Shard `shard` of `shards` of one table, its rows updated by the RowOptimizer O.
template <RowOptimizer O>
class RowShard final : public detail::RowTableBase {
 public:
  RowShard(TableSpec spec, O optimizer, std::size_t shard = 0, std::size_t shards = 1)
      : spec_(std::move(spec)), optimizer_(std::move(optimizer)), shard_(shard), shards_(shards) {
    if (spec_.dim == 0) throw ConfigError("table '" + spec_.name + "': dim must be at least 1");
    if (shards_ == 0 || shard_ >= shards_)
      throw ConfigError("table '" + spec_.name + "': shard " + std::to_string(shard_) + " of " +
                        std::to_string(shards_) + " does not exist");
    if (!(spec_.init_scale >= 0.0f))
      throw ConfigError("table '" + spec_.name + "': init_scale must be >= 0 (is " + std::to_string(spec_.init_scale) +
                        ")");
    if constexpr (row_optimizer_needs_zero_rows<O>) {
      if (spec_.init_scale != 0.0f)
        throw ConfigError("table '" + spec_.name + "': optimizer " + std::string(O::name) +
                          " needs rows that start at zero, but init_scale is " + std::to_string(spec_.init_scale));
    }
    state_size_ = optimizer_.state_size(spec_.dim);
    row_bytes_ = (spec_.dim + state_size_) * sizeof(float) + sizeof(std::uint64_t);
    chunk_rows_ = std::clamp<std::size_t>((std::size_t{64} << 10) / row_bytes_, 1, 4096);
  }

  const TableSpec& spec() const noexcept override { return spec_; }
  const O& optimizer() const noexcept { return optimizer_; }
  std::size_t shard() const noexcept { return shard_; }
  std::size_t shards() const noexcept { return shards_; }
  std::size_t dim() const noexcept override { return spec_.dim; }
  std::size_t state_size() const noexcept override { return state_size_; }
  std::size_t rows() const noexcept override { return rows_; }
  /// Slab bytes allocated (whole chunks) plus the key map's arrays.
  std::size_t bytes() const noexcept override { return chunks_.size() * chunk_rows_ * row_bytes_ + slots_.bytes(); }
  /// Rows per slab chunk, and the bytes a row takes in the slabs.
  std::size_t chunk_rows() const noexcept { return chunk_rows_; }
  std::size_t row_bytes() const noexcept { return row_bytes_; }
  /// Steps applied to the shard (each apply() call counts one).
  std::uint64_t updates() const noexcept override { return updates_; }
  bool contains(std::uint64_t key) const { return slots_.find(key) != flotilla::detail::KeyMap::none; }

  /// The row of `key` (created if missing) and its optimizer state.
  std::span<float> row(std::uint64_t key) { return values_of(slot_of(key)); }
  std::span<float> state(std::uint64_t key) { return state_of(slot_of(key)); }

  void gather(std::span<const std::uint64_t> keys, std::span<float> out) override {
    check_size("gather", keys.size(), out.size());
    const std::size_t d = spec_.dim;
    resolve(keys);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (i + flotilla::detail::prefetch_distance < keys.size())
        flotilla::detail::prefetch(values_of(found_[i + flotilla::detail::prefetch_distance]).data());
      const auto v = values_of(found_[i]);
      std::copy(v.begin(), v.end(), out.begin() + static_cast<std::ptrdiff_t>(i * d));
    }
  }

  void peek(std::span<const std::uint64_t> keys, std::span<float> out) override {
    check_size("peek", keys.size(), out.size());
    const std::size_t d = spec_.dim;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const std::span<float> to = out.subspan(i * d, d);
      if (const auto slot = slots_.find(keys[i]); slot != flotilla::detail::KeyMap::none) {
        const auto v = values_of(slot);
        std::copy(v.begin(), v.end(), to.begin());
      } else {
        initial_values(keys[i], to);
      }
    }
  }

  void apply(std::span<const std::uint64_t> keys, std::span<const float> gradients) override {
    check_size("apply", keys.size(), gradients.size());
    const std::size_t d = spec_.dim;
    resolve(keys);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (i + flotilla::detail::prefetch_distance < keys.size()) prefetch_row(found_[i + flotilla::detail::prefetch_distance]);
      const std::size_t s = found_[i];
      optimizer_.apply(values_of(s), state_of(s), gradients.subspan(i * d, d));
      ++count_of(s);
    }
    ++updates_;
  }

  void for_each_row(const std::function<void(std::uint64_t, std::span<const float>, std::span<const float>,
                                             std::uint64_t)>& f) const override {
    for (const auto& [key, s] : sorted_slots()) {
      f(key, std::span<const float>(values_of(s)), std::span<const float>(state_of(s)), count_of(s));
    }
  }

  void save(const std::string& path) const override {
    const std::size_t d = spec_.dim, st = state_size_;
    std::vector<std::byte> out(detail::row_file_header_size + rows_ * (16 + 4 * (d + st)) + 4);
    std::byte* p = out.data();
    std::memcpy(p, detail::row_file_magic, 8);
    flotilla::detail::store_le(p + 8, detail::row_file_version);
    flotilla::detail::store_le(p + 12, spec_.id);
    flotilla::detail::store_le(p + 16, static_cast<std::uint64_t>(d));
    flotilla::detail::store_le(p + 24, static_cast<std::uint64_t>(st));
    flotilla::detail::store_le(p + 32, static_cast<std::uint64_t>(rows_));
    flotilla::detail::store_le(p + 40, updates_);
    p += detail::row_file_header_size;
    for_each_row([&](std::uint64_t key, std::span<const float> v, std::span<const float> s, std::uint64_t n) {
      flotilla::detail::store_le(p, key);
      p += 8;
      for (float x : v) flotilla::detail::store_le(p, x), p += 4;
      for (float x : s) flotilla::detail::store_le(p, x), p += 4;
      flotilla::detail::store_le(p, n);
      p += 8;
    });
    const std::uint32_t crc = crc32(std::span<const std::byte>(out.data(), out.size() - 4));
    flotilla::detail::store_le(p, crc);

    const std::string tmp = path + ".tmp";
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      if (!f) throw CheckpointError("table '" + spec_.name + "' shard " + std::to_string(shard_) + ": cannot write " + tmp);
      f.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
      f.flush();
      if (!f) throw CheckpointError("table '" + spec_.name + "' shard " + std::to_string(shard_) + ": writing " + tmp + " failed");
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec)
      throw CheckpointError("table '" + spec_.name + "' shard " + std::to_string(shard_) + ": cannot rename " + tmp +
                                " to " + path + ": " + ec.message(),
                            ec);
  }

  /// Replaces the shard's rows, states and counts with those saved in `path`.
  void load(const std::string& path) override {
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    if (!f) throw DataError(path, 0, "cannot open the shard file of table '" + spec_.name + "'");
    const auto end = f.tellg();
    if (end < 0) throw DataError(path, 0, "cannot read the size of the shard file");
    const auto size = static_cast<std::size_t>(end);
    if (size < detail::row_file_header_size + 4)
      throw DataError(path, size, "truncated: " + std::to_string(size) + " bytes, less than a header and a CRC");
    std::vector<std::byte> in(size);
    f.seekg(0);
    f.read(reinterpret_cast<char*>(in.data()), static_cast<std::streamsize>(size));
    if (!f) throw DataError(path, 0, "cannot read " + std::to_string(size) + " bytes");
    const std::byte* p = in.data();
    if (std::memcmp(p, detail::row_file_magic, 8) != 0) throw DataError(path, 0, "not a row shard file (bad magic)");
    const auto version = flotilla::detail::load_le<std::uint32_t>(p + 8);
    if (version != detail::row_file_version)
      throw DataError(path, 8, "version " + std::to_string(version) + ", this build reads version " +
                                   std::to_string(detail::row_file_version));
    const auto id = flotilla::detail::load_le<std::uint32_t>(p + 12);
    const auto d = flotilla::detail::load_le<std::uint64_t>(p + 16);
    const auto st = flotilla::detail::load_le<std::uint64_t>(p + 24);
    const auto n = flotilla::detail::load_le<std::uint64_t>(p + 32);
    const auto updates = flotilla::detail::load_le<std::uint64_t>(p + 40);
    if (id != spec_.id)
      throw DataError(path, 12, "table id " + std::to_string(id) + ", expected " + std::to_string(spec_.id) + " ('" +
                                    spec_.name + "')");
    if (d != spec_.dim)
      throw DataError(path, 16, "dim " + std::to_string(d) + ", table '" + spec_.name + "' has " + std::to_string(spec_.dim));
    if (st != state_size_)
      throw DataError(path, 24, "optimizer state of " + std::to_string(st) + " floats per row, table '" + spec_.name +
                                    "''s optimizer keeps " + std::to_string(state_size_));
    const std::size_t per_row = 16 + 4 * (spec_.dim + state_size_);
    const std::size_t body = size - detail::row_file_header_size - 4;
    if (n > body / per_row || n * per_row != body)
      throw DataError(path, size, "announces " + std::to_string(n) + " rows of " + std::to_string(per_row) +
                                      " bytes, but holds " + std::to_string(body) + " bytes of rows (truncated or corrupt)");
    const std::uint32_t want = crc32(std::span<const std::byte>(in.data(), size - 4));
    const auto got = flotilla::detail::load_le<std::uint32_t>(in.data() + size - 4);
    if (want != got) throw DataError(path, size - 4, "CRC-32 mismatch: the file is corrupt");

    // Refused before the rows held are dropped, so a shard too small for the file keeps its rows.
    const std::size_t need = (n + chunk_rows_ - 1) / chunk_rows_ * chunk_rows_ * row_bytes_ + flotilla::detail::KeyMap::bytes_for_size(n);
    if (spec_.max_bytes_per_shard != 0 && need > spec_.max_bytes_per_shard)
      throw DataError(path, 32, std::to_string(n) + " rows need " + std::to_string(need) + " bytes, past table '" +
                                    spec_.name + "''s bound of " + std::to_string(spec_.max_bytes_per_shard) +
                                    " bytes per shard (max_bytes_per_shard)");
    clear();
    p += detail::row_file_header_size;
    std::uint64_t previous = 0;
    for (std::size_t r = 0; r < n; ++r) {
      const auto offset = static_cast<std::uint64_t>(p - in.data());
      const auto key = flotilla::detail::load_le<std::uint64_t>(p);
      if (r > 0 && key <= previous) throw DataError(path, offset, "rows out of key order (key " + std::to_string(key) + ")");
      previous = key;
      p += 8;
      const std::size_t s = create(key, false);
      for (float& x : values_of(s)) x = flotilla::detail::load_le<float>(p), p += 4;
      for (float& x : state_of(s)) x = flotilla::detail::load_le<float>(p), p += 4;
      count_of(s) = flotilla::detail::load_le<std::uint64_t>(p);
      p += 8;
    }
    updates_ = updates;
  }

  /// Drops every row.
  void clear() {
    slots_ = flotilla::detail::KeyMap{};
    chunks_.clear();
    rows_ = 0;
    updates_ = 0;
  }

 private:
  // Cache-line aligned, so that a row of 16 floats is one line, not two. Mutable: a const shard
  // still hands out its rows to its own non-const members; the public const interface only reads.
  struct Chunk {
    mutable Buffer<float> values, state;
    mutable Buffer<std::uint64_t> counts;
  };

  void check_size(const char* op, std::size_t keys, std::size_t values) const {
    if (values != keys * spec_.dim)
      throw ShapeError("table '" + spec_.name + "' shard " + std::to_string(shard_) + ": " + op + " of " +
                       std::to_string(keys) + " rows of dim " + std::to_string(spec_.dim) + " with " +
                       std::to_string(values) + " values");
  }

  std::span<float> values_of(std::size_t s) const {
    return {chunks_[s / chunk_rows_].values.data() + (s % chunk_rows_) * spec_.dim, spec_.dim};
  }
  std::span<float> state_of(std::size_t s) const {
    if (state_size_ == 0) return {};
    return {chunks_[s / chunk_rows_].state.data() + (s % chunk_rows_) * state_size_, state_size_};
  }
  std::uint64_t& count_of(std::size_t s) const { return chunks_[s / chunk_rows_].counts[s % chunk_rows_]; }

  std::vector<std::pair<std::uint64_t, std::size_t>> sorted_slots() const {
    std::vector<std::pair<std::uint64_t, std::size_t>> v;
    v.reserve(slots_.size());
    slots_.for_each([&](std::uint64_t key, std::uint32_t slot) { v.emplace_back(key, slot); });
    std::sort(v.begin(), v.end());
    return v;
  }

  // The slot of every key (rows created for missing ones) into found_: the map is asked for the
  // cells of a key a few keys before it is looked up, so that the misses of a table larger than
  // the caches overlap.
  void resolve(std::span<const std::uint64_t> keys) {
    found_.resize(keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (i + flotilla::detail::prefetch_distance < keys.size())
        slots_.prefetch(keys[i + flotilla::detail::prefetch_distance]);
      found_[i] = static_cast<std::uint32_t>(slot_of(keys[i]));
    }
  }

  [[gnu::always_inline]] void prefetch_row(std::size_t s) const noexcept {
    flotilla::detail::prefetch(values_of(s).data());
    if (state_size_) flotilla::detail::prefetch(state_of(s).data());
    flotilla::detail::prefetch(&count_of(s));
  }

  std::size_t slot_of(std::uint64_t key) {
    if (const auto slot = slots_.find(key); slot != flotilla::detail::KeyMap::none) return slot;
    return create(key, true);
  }

  /// The values the row of `key` starts with.
  void initial_values(std::uint64_t key, std::span<float> v) const {
    if constexpr (row_optimizer_needs_zero_rows<O>) {
      std::fill(v.begin(), v.end(), 0.0f);
    } else {
      for (std::size_t i = 0; i < v.size(); ++i)
        v[i] = spec_.init_scale == 0.0f ? 0.0f : initial_row_value(spec_.seed, spec_.id, key, i, spec_.init_scale);
    }
  }

  /// A new slot for `key`: its values initialised (when `init`) and its optimizer state too.
  std::size_t create(std::uint64_t key, bool init) {
    const std::size_t s = rows_;
    const bool new_chunk = s == chunks_.size() * chunk_rows_;
    if (s >= flotilla::detail::KeyMap::max_size)
      throw Error("table '" + spec_.name + "' shard " + std::to_string(shard_) + " of " + std::to_string(shards_) +
                  ": holds " + std::to_string(rows_) + " rows, the most one shard can");
    const std::size_t after = chunks_.size() * chunk_rows_ * row_bytes_ + slots_.bytes_after_insert() +
                              (new_chunk ? chunk_rows_ * row_bytes_ : 0);
    if (spec_.max_bytes_per_shard != 0 && after > spec_.max_bytes_per_shard)
      throw Error("table '" + spec_.name + "' shard " + std::to_string(shard_) + " of " + std::to_string(shards_) +
                  ": cannot create the row of key " + std::to_string(key) + ": it holds " + std::to_string(rows_) +
                  " rows in " + std::to_string(bytes()) + " bytes, and one more would need " + std::to_string(after) +
                  ", past the bound of " + std::to_string(spec_.max_bytes_per_shard) + " bytes (max_bytes_per_shard)");
    if (new_chunk) {
      Chunk c;
      c.values.resize(chunk_rows_ * spec_.dim);
      c.state.resize(chunk_rows_ * state_size_);
      c.counts.resize(chunk_rows_);
      chunks_.push_back(std::move(c));
    }
    slots_.insert(key, static_cast<std::uint32_t>(s));
    ++rows_;
    count_of(s) = 0;
    if (init) {
      auto v = values_of(s);
      initial_values(key, v);
      auto st = state_of(s);
      std::fill(st.begin(), st.end(), 0.0f);
      optimizer_.init_state(std::span<const float>(v), st);
    }
    return s;
  }

  TableSpec spec_;
  O optimizer_;
  std::size_t shard_, shards_;
  std::size_t state_size_ = 0, row_bytes_ = 0, chunk_rows_ = 1;
  flotilla::detail::KeyMap slots_;
  std::vector<Chunk> chunks_;
  std::vector<std::uint32_t> found_;  // resolve()'s slots, kept step to step
  std::size_t rows_ = 0;
  std::uint64_t updates_ = 0;
};

}  // namespace flotilla::sparse
#endif  // FLOTILLA_SPARSE_ROWTABLE_HPP_INCLUDED
