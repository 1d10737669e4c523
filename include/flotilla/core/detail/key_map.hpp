// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_DETAIL_KEYMAP_HPP_INCLUDED
#define FLOTILLA_CORE_DETAIL_KEYMAP_HPP_INCLUDED
// A map from 64-bit keys to 32-bit slots, open addressing with linear probing: a parameter
// server's rows by key (sparse/row_table.hpp), a batch's distinct keys (nn/embedding.hpp).
//
// A server finds a few thousand rows per step in tables of millions. A node-based map
// (std::unordered_map) costs a pointer chase and a cache miss per lookup, a heap node per row and
// about 40 bytes per row on top of the row; this one keeps keys and slots in two flat arrays, at
// most 70% full, so a lookup is one hash and, mostly, one or two adjacent probes, at 17 bytes per
// row (12 bytes a cell).
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "flotilla/core/detail/prefetch.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/random.hpp"

namespace flotilla::detail {

class KeyMap {
 public:
  /// The slot of an absent key, and the largest number of keys a map holds.
  static constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
  static constexpr std::size_t max_size = none - 1;

  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return slots_.size(); }
  /// Bytes of the arrays.
  std::size_t bytes() const noexcept { return bytes_for(capacity()); }
  /// Bytes of the arrays of a map grown from empty to hold n keys.
  static std::size_t bytes_for_size(std::size_t n) { return bytes_for(KeyMap{}.grown_capacity(n)); }
  /// Bytes of the arrays once one more key is in (after the growth that key would cause).
  std::size_t bytes_after_insert() const noexcept { return bytes_for(grown_capacity(size_ + 1)); }

  std::uint32_t find(std::uint64_t key) const noexcept {
    if (size_ == 0) return none;
    for (std::size_t i = home(key);; i = (i + 1) & mask_) {
      if (slots_[i] == none) return none;
      if (keys_[i] == key) return slots_[i];
    }
  }

  /// Asks for the cells where a find or insert of `key` starts (see core/detail/prefetch.hpp).
  [[gnu::always_inline]] void prefetch(std::uint64_t key) const noexcept {
    if (slots_.empty()) return;
    const std::size_t i = home(key);
    flotilla::detail::prefetch(keys_.data() + i);
    flotilla::detail::prefetch(slots_.data() + i);
  }

  /// Inserts (key, slot) when key is absent; returns the slot the key has and whether it is new.
  std::pair<std::uint32_t, bool> insert(std::uint64_t key, std::uint32_t slot) {
    if (slot == none) [[unlikely]]
      throw Error("KeyMap: slot " + std::to_string(slot) + " is reserved");
    // Past 70% full (or empty): grow. The same test as grown_capacity's, inline: inserts are the
    // hot path of a batch's lookup.
    if ((size_ + 1) * 10 > capacity() * 7) [[unlikely]]
      rehash(grown_capacity(size_ + 1));
    for (std::size_t i = home(key);; i = (i + 1) & mask_) {
      if (slots_[i] == none) {
        keys_[i] = key;
        slots_[i] = slot;
        ++size_;
        return {slot, true};
      }
      if (keys_[i] == key) return {slots_[i], false};
    }
  }

  /// Removes every key; keeps the arrays (a map refilled every step allocates once).
  void clear() noexcept {
    if (size_ == 0) return;
    for (auto& s : slots_) s = none;
    size_ = 0;
  }

  /// Calls f(key, slot) for every key, in no particular order.
  template <class F>
  void for_each(F&& f) const {
    for (std::size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i] != none) f(keys_[i], slots_[i]);
  }

 private:
  static std::size_t bytes_for(std::size_t cells) noexcept { return cells * (sizeof(std::uint64_t) + sizeof(std::uint32_t)); }

  /// The capacity for n keys: a power of two at least 16, at most 70% full.
  std::size_t grown_capacity(std::size_t n) const {
    if (n > max_size) throw Error("KeyMap: more than " + std::to_string(max_size) + " keys");
    std::size_t c = capacity() < 16 ? 16 : capacity();
    while (n * 10 > c * 7) c *= 2;
    return c;
  }

  std::size_t home(std::uint64_t key) const noexcept {
    return static_cast<std::size_t>(mix(key, 0x243f6a8885a308d3ULL)) & mask_;
  }

  void rehash(std::size_t cells) {
    std::vector<std::uint64_t> keys(cells);
    std::vector<std::uint32_t> slots(cells, none);
    keys.swap(keys_);
    slots.swap(slots_);
    mask_ = cells - 1;
    size_ = 0;
    for (std::size_t i = 0; i < slots.size(); ++i)
      if (slots[i] != none) insert(keys[i], slots[i]);
  }

  std::vector<std::uint64_t> keys_;
  std::vector<std::uint32_t> slots_;
  std::size_t mask_ = 0, size_ = 0;
};

}  // namespace flotilla::detail
#endif  // FLOTILLA_CORE_DETAIL_KEYMAP_HPP_INCLUDED
