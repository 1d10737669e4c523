// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_SPARSE_DETAIL_DATASOURCE_HPP_INCLUDED
#define FLOTILLA_SPARSE_DETAIL_DATASOURCE_HPP_INCLUDED
// Where a sparse worker's batches come from.
//
//  - MemorySource: examples in memory. Every worker draws the same permutation from (seed, epoch)
//    and takes its contiguous part of each global batch, so W synchronous workers of batch B see
//    exactly the samples of one worker of batch W x B.
//  - FileSource: a click-log file read as a stream (plain or gzip, larger than memory), worker w
//    of W reading its shard of the lines (data::ReaderOptions::worker, workers) through an
//    optional shuffle buffer. Without a shuffle buffer, step k of worker w reads lines
//    w + W (kB + i), i < B, which together are lines [kWB, (k+1)WB) of the file: the global batch
//    of one worker reading it alone, so the equivalence holds for files too.
//
// A source that knows how many steps an epoch has says so (MemorySource); otherwise the workers
// agree at each step whether every one of them still has a full batch, and the epoch ends at the
// first step where one does not.
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/data/ctr_example.hpp"
#include "flotilla/data/ctr_reader.hpp"

namespace flotilla::sparse::detail {

/// A deterministic permutation of [0, n) for (seed, epoch): the same on every worker.
inline std::vector<std::size_t> epoch_order(std::size_t n, std::uint64_t seed, std::uint64_t epoch) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  Generator g(flotilla::detail::mix(seed, 0x5eed0000ULL + epoch));
  flotilla::shuffle(order.begin(), order.end(), g);  // qualified: ADL would also find std::shuffle
  return order;
}

class MemorySource {
 public:
  MemorySource(std::span<const data::CtrExample> examples, std::size_t worker, std::size_t workers, std::size_t batch,
               std::uint64_t seed)
      : examples_(examples), worker_(worker), workers_(workers), batch_(batch), seed_(seed) {}

  std::optional<std::size_t> steps_per_epoch() const { return examples_.size() / (workers_ * batch_); }

  void begin_epoch(std::uint64_t epoch) {
    order_ = epoch_order(examples_.size(), seed_, epoch);
    next_ = 0;
  }
  void skip(std::size_t steps) { next_ += steps; }
  std::uint64_t skipped() const noexcept { return 0; }

  /// This worker's part of the next global batch, or false when the epoch has no full one left.
  bool next_batch(std::vector<const data::CtrExample*>& out) {
    const std::size_t global = workers_ * batch_;
    if ((next_ + 1) * global > examples_.size()) return false;
    out.clear();
    const std::size_t first = next_ * global + worker_ * batch_;
    for (std::size_t i = 0; i < batch_; ++i) out.push_back(&examples_[order_[first + i]]);
    ++next_;
    return true;
  }

 private:
  std::span<const data::CtrExample> examples_;
  std::size_t worker_, workers_, batch_;
  std::uint64_t seed_;
  std::vector<std::size_t> order_;
  std::size_t next_ = 0;
};

template <class Format>
class FileSource {
 public:
  FileSource(const std::string& path, data::ReaderOptions options, std::size_t worker, std::size_t workers, std::size_t batch)
      : reader_(path, shard(options, worker, workers)), batch_(batch), storage_(batch) {}

  std::optional<std::size_t> steps_per_epoch() const { return std::nullopt; }

  void begin_epoch(std::uint64_t epoch) { reader_.restart(epoch); }
  void skip(std::size_t steps) {
    std::vector<const data::CtrExample*> ignored;
    for (std::size_t s = 0; s < steps; ++s) next_batch(ignored);
  }

  bool next_batch(std::vector<const data::CtrExample*>& out) {
    out.clear();
    for (std::size_t i = 0; i < batch_; ++i) {
      if (!reader_.next(storage_[i])) return false;
      out.push_back(&storage_[i]);
    }
    return true;
  }

  /// Malformed lines skipped in this epoch (ReaderOptions::on_malformed).
  std::uint64_t skipped() const noexcept { return reader_.skipped(); }

 private:
  static data::ReaderOptions shard(data::ReaderOptions o, std::size_t worker, std::size_t workers) {
    if (o.workers != 1 || o.worker != 0)
      throw ConfigError("sparse::Trainer: ReaderOptions::worker and workers are the trainer's to set (one shard per worker)");
    o.worker = worker;
    o.workers = workers;
    return o;
  }

  data::CtrReader<Format> reader_;
  std::size_t batch_;
  std::vector<data::CtrExample> storage_;  // a batch's examples, their capacity reused step to step
};

}  // namespace flotilla::sparse::detail
#endif  // FLOTILLA_SPARSE_DETAIL_DATASOURCE_HPP_INCLUDED
