// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// detail::KeyMap, the flat map from 64-bit keys to slots (a server's rows, a batch's distinct keys), against std::map.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <map>

#include "flotilla/core/random.hpp"
#include "flotilla/core/detail/key_map.hpp"

namespace {
using flotilla::detail::KeyMap;
}

TEST_CASE("the key map finds every key inserted, whatever the keys, through its growth, and keeps the first slot") {
  KeyMap map;
  std::map<std::uint64_t, std::uint32_t> reference;
  flotilla::Generator g(5);
  CHECK(map.find(0) == KeyMap::none);
  for (std::uint32_t i = 0; i < 50000; ++i) {
    // Random keys, small consecutive ones (buckets) and the extremes.
    const std::uint64_t key = i % 3 == 0 ? g() : i % 3 == 1 ? i : (i % 2 ? 0 : std::numeric_limits<std::uint64_t>::max() - i);
    const auto [slot, fresh] = map.insert(key, i);
    const auto [it, ref_fresh] = reference.emplace(key, i);
    CHECK(fresh == ref_fresh);
    CHECK(slot == it->second);
  }
  CHECK(map.size() == reference.size());
  CHECK(map.size() * 10 <= map.capacity() * 7);
  for (const auto& [key, slot] : reference) CHECK(map.find(key) == slot);
  std::size_t seen = 0;
  map.for_each([&](std::uint64_t key, std::uint32_t slot) {
    ++seen;
    CHECK(reference.at(key) == slot);
  });
  CHECK(seen == reference.size());
  CHECK(map.find(0x1234567812345678ULL) == KeyMap::none);
  CHECK(map.bytes() == map.capacity() * 12);
  CHECK(KeyMap::bytes_for_size(map.size()) == map.bytes());
  const std::size_t capacity = map.capacity();
  map.clear();
  CHECK(map.size() == 0);
  CHECK(map.capacity() == capacity);
  CHECK(map.find(1) == KeyMap::none);
  CHECK_THROWS_AS(map.insert(1, KeyMap::none), flotilla::Error);
}
