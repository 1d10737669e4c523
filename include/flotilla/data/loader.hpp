// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_DATA_LOADER_HPP_INCLUDED
#define FLOTILLA_DATA_LOADER_HPP_INCLUDED
// Loader<T>: cuts a Dataset into shuffled batches, one shard of each global batch per worker.
//
// What the distributed trainer relies on:
//
// * Order. Epoch e visits the samples in a permutation drawn from (seed, e) alone, with flotilla's
//   Generator and flotilla::shuffle (no std distributions, whose output differs between standard
//   libraries). Every worker computes the same permutation without communicating. With shuffle off
//   the order is 0, 1, 2, ...
// * Global batches. With G = batch_size * shard_count, global batch b covers positions
//   [b*G, (b+1)*G) of the permutation, and shard i takes the i-th contiguous batch_size of them.
//   So, concatenated in shard order, the shards' batch b is exactly the batch b that one worker
//   with batch size G gets: training with S workers is training with batch size G.
// * The last global batch. When the sample count N is not a multiple of G and drop_last is off,
//   the final global batch has r = N mod G samples. They are split as evenly as possible: every
//   shard gets r / S, and the first r mod S shards one more. A shard may get no sample; it still
//   returns a batch (of size 0), so every shard sees the same number of batches and no worker skips
//   a collective operation. Batch::global_size is r there (G elsewhere): a loss averaged over the
//   global batch is the sum over shards of per-sample losses times 1/global_size.
//   With drop_last on, the final partial global batch is skipped by every shard.
//   With unit_size u > 1 the final batch is cut into units of u samples instead (the last unit
//   shorter), and the shards take contiguous runs of whole units, split as evenly as possible in
//   the same way: the virtual shards of a reproducible sum (policy::Reproducible) never straddle
//   two workers. Full batches are whole units already (batch_size must be a multiple of u).
// * Resuming. start_epoch(e, k) continues epoch e at batch k: what follows is identical to the
//   batches k, k+1, ... of an uninterrupted epoch e, so a checkpoint need only store (e, k).
// * Prefetch. With prefetch > 0, a background thread gathers upcoming batches into a ring of
//   buffers, at most `prefetch` batches ahead of the one the caller holds. Batches are the same
//   with or without it. The thread is joined by start_epoch() and by the destructor; an exception
//   thrown while gathering is rethrown by next(), in order (after the batches gathered before it).
//
// A Loader keeps a pointer to its Dataset, which must outlive it and must not change while it is in
// use. Batch::ids carries each sample's index in the data set, the stable id that per-sample
// randomness (dropout masks) is keyed on.
#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <mutex>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/data/dataset.hpp"
#include "flotilla/core/targets.hpp"

namespace flotilla::data {

/// One shard's part of a global batch. Its views point into the Loader's buffers, valid until the
/// next call to Loader::next() or start_epoch().
template <class T>
struct Batch {
  ConstMatrixView<T> inputs{nullptr, 0, 0};  ///< (features x n), contiguous, n = size()
  Targets<T> targets;                         ///< labels, or (outputs x n) values, of these samples
  std::span<const std::uint64_t> ids;         ///< dataset indices of the samples
  std::uint64_t epoch = 0;
  std::size_t index = 0;        ///< batch index within the epoch (the same on every shard)
  std::size_t global_size = 0;  ///< samples in the global batch this batch is a shard of

  std::size_t size() const noexcept { return ids.size(); }
};

struct LoaderOptions {
  std::size_t batch_size = 64;  ///< samples per shard in a full batch
  bool shuffle = true;
  std::uint64_t seed = 0;
  std::size_t shard_index = 0;  ///< this worker's shard, in [0, shard_count)
  std::size_t shard_count = 1;  ///< workers that split each global batch
  bool drop_last = false;       ///< skip the final partial global batch
  std::size_t prefetch = 2;     ///< batches gathered ahead by a background thread; 0 = none
  /// Samples of the smallest part of a global batch a shard may take (see "The last global batch").
  std::size_t unit_size = 1;
};

namespace detail {

/// Where shard `shard` of global batch `b` lies in the epoch's permutation.
struct ShardSlice {
  std::size_t begin = 0;        ///< first position in the permutation
  std::size_t count = 0;        ///< samples in this shard's batch
  std::size_t global_size = 0;  ///< samples in the whole global batch
};

inline ShardSlice shard_slice(std::size_t samples, std::size_t batch_size, std::size_t shard_count, std::size_t shard,
                              std::size_t b, std::size_t unit = 1) noexcept {
  const std::size_t g = batch_size * shard_count;
  const std::size_t start = b * g;
  const std::size_t r = std::min(g, samples - start);
  if (r == g) return {start + shard * batch_size, batch_size, g};
  // Whole units, as evenly as possible (the first shards one more); the last unit may be short.
  const std::size_t units = (r + unit - 1) / unit;
  const std::size_t q = units / shard_count;
  const std::size_t extra = units % shard_count;
  const std::size_t first = std::min(r, (shard * q + std::min(shard, extra)) * unit);
  const std::size_t end = std::min(r, first + (q + (shard < extra ? 1 : 0)) * unit);
  return {start + first, end - first, r};
}

}  // namespace detail

template <class T>
class Loader {
 public:
  /// Validates the options (ConfigError naming the field) and the data set, and positions the
  /// loader at the start of epoch 0.
  Loader(const Dataset<T>& data, LoaderOptions options) : data_(&data), opt_(options) {
    if (opt_.batch_size == 0) throw ConfigError("LoaderOptions.batch_size must be > 0");
    if (opt_.shard_count == 0) throw ConfigError("LoaderOptions.shard_count must be > 0");
    if (opt_.shard_index >= opt_.shard_count)
      throw ConfigError("LoaderOptions.shard_index (" + std::to_string(opt_.shard_index) + ") must be below shard_count (" +
                        std::to_string(opt_.shard_count) + ")");
    if (opt_.batch_size > std::numeric_limits<std::size_t>::max() / opt_.shard_count)
      throw ConfigError("LoaderOptions.batch_size * shard_count overflows");
    if (opt_.unit_size == 0 || opt_.batch_size % opt_.unit_size != 0)
      throw ConfigError("LoaderOptions.batch_size (" + std::to_string(opt_.batch_size) +
                        ") must be a multiple of unit_size (" + std::to_string(opt_.unit_size) + ")");
    data.validate();
    samples_ = data.size();
    const std::size_t g = opt_.batch_size * opt_.shard_count;
    batches_ = opt_.drop_last ? samples_ / g : samples_ / g + (samples_ % g != 0 ? 1 : 0);
    if (batches_ == 0)
      throw ConfigError("Loader: data set '" + data.name + "' has " + std::to_string(samples_) +
                        " samples, no batch can be made of them with a global batch of " + std::to_string(g) +
                        (opt_.drop_last ? " and LoaderOptions.drop_last set" : ""));
    // One slot is the batch the caller holds; the others are gathered ahead.
    slots_.resize(opt_.prefetch == 0 ? 1 : std::min(opt_.prefetch, batches_) + 1);
    const std::size_t features = data.feature_size();
    const std::size_t outputs = data.target_kind() == TargetKind::values ? data.target_size() : 0;
    for (auto& s : slots_) {
      s.inputs.resize(features * opt_.batch_size);
      s.values.resize(outputs * opt_.batch_size);
      s.labels.reserve(data.target_kind() == TargetKind::labels ? opt_.batch_size : 0);
      s.ids.reserve(opt_.batch_size);
    }
    start_epoch(0);
  }
  /// A Loader keeps a pointer to its data set, so it cannot be given a temporary.
  Loader(const Dataset<T>&&, LoaderOptions) = delete;

  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;
  ~Loader() { stop(); }

  const LoaderOptions& options() const noexcept { return opt_; }
  /// Batches per epoch (the same on every shard).
  std::size_t batches_per_epoch() const noexcept { return batches_; }
  std::uint64_t epoch() const noexcept { return epoch_; }

  /// Starts epoch `epoch` at batch `first_batch` (0 for a whole epoch; more to resume one). Any
  /// batch previously returned by next() becomes invalid.
  void start_epoch(std::uint64_t epoch, std::size_t first_batch = 0) {
    if (first_batch > batches_)
      throw ConfigError("Loader::start_epoch: first_batch " + std::to_string(first_batch) + " is past the " +
                        std::to_string(batches_) + " batches of an epoch");
    stop();
    epoch_ = epoch;
    first_ = first_batch;
    remaining_ = batches_ - first_batch;
    delivered_ = 0;
    order_.resize(samples_);
    std::iota(order_.begin(), order_.end(), std::uint64_t{0});
    if (opt_.shuffle) {
      Generator g = Generator(opt_.seed).fork(epoch);
      flotilla::shuffle(order_.begin(), order_.end(), g);  // qualified: ADL would also find std::shuffle
    }
  }

  /// The next batch of this shard, or nullptr at the end of the epoch. The batch stays valid until
  /// the next call of next() or start_epoch().
  const Batch<T>* next() {
    if (opt_.prefetch == 0) {
      if (delivered_ == remaining_) return nullptr;
      fill(slots_[0], first_ + delivered_);
      ++delivered_;
      return &*slots_[0].batch;
    }
    if (!thread_.joinable()) {
      if (delivered_ == remaining_) return nullptr;
      thread_ = std::thread([this] { produce(); });  // started by the first call, not by start_epoch()
    }
    std::unique_lock<std::mutex> lock(mutex_);
    if (holding_) {
      holding_ = false;
      ++delivered_;
      space_.notify_one();
    }
    if (delivered_ == remaining_) return nullptr;
    filled_.wait(lock, [this] { return ready_ > delivered_ || error_ != nullptr; });
    if (ready_ <= delivered_) std::rethrow_exception(error_);
    holding_ = true;
    return &*slots_[delivered_ % slots_.size()].batch;
  }

 private:
  struct Slot {
    Buffer<T> inputs;
    Buffer<T> values;
    std::vector<std::int32_t> labels;
    std::vector<std::uint64_t> ids;
    std::optional<Batch<T>> batch;
  };

  /// Gathers batch `b` of the epoch into `s`.
  void fill(Slot& s, std::size_t b) {
    const Dataset<T>& data = *data_;
    // The data set is only read here, but a caller that resized it would send us out of bounds.
    if (data.size() != samples_ || (data.target_kind() == TargetKind::labels && data.labels.size() != samples_))
      throw ConfigError("Loader: data set '" + data.name + "' changed size while a Loader was reading it (" +
                        std::to_string(samples_) + " samples when the Loader was made, " + std::to_string(data.size()) + " now)");
    const detail::ShardSlice slice = detail::shard_slice(samples_, opt_.batch_size, opt_.shard_count, opt_.shard_index, b, opt_.unit_size);
    const std::size_t n = slice.count;
    s.ids.assign(order_.begin() + static_cast<std::ptrdiff_t>(slice.begin),
                 order_.begin() + static_cast<std::ptrdiff_t>(slice.begin + n));
    const std::size_t features = data.feature_size();
    for (std::size_t j = 0; j < n; ++j)
      std::copy_n(data.inputs.data() + s.ids[j] * features, features, s.inputs.data() + j * features);
    if (data.target_kind() == TargetKind::values) {
      const std::size_t outputs = data.target_size();
      for (std::size_t j = 0; j < n; ++j)
        std::copy_n(data.targets.data() + s.ids[j] * outputs, outputs, s.values.data() + j * outputs);
    } else {
      s.labels.resize(n);
      for (std::size_t j = 0; j < n; ++j) s.labels[j] = data.labels[s.ids[j]];
    }
    // Assigning to an Eigen Map copies values rather than re-pointing it, so the batch is rebuilt.
    // (Member by member, not with designated initializers: nvcc 13's device front end crashes on
    // those here, and the Loader is compiled by nvcc wherever a CUDA model's Trainer is.)
    const bool values = data.target_kind() == TargetKind::values;
    const Targets<T> targets{
        values ? std::span<const std::int32_t>() : std::span<const std::int32_t>(s.labels),
        ConstMatrixView<T>(values ? s.values.data() : nullptr, values ? static_cast<Eigen::Index>(data.target_size()) : 0,
                           values ? static_cast<Eigen::Index>(n) : 0)};
    s.batch.reset();
    s.batch.emplace(Batch<T>{ConstMatrixView<T>(s.inputs.data(), static_cast<Eigen::Index>(features), static_cast<Eigen::Index>(n)),
                             targets, std::span<const std::uint64_t>(s.ids), epoch_, b, slice.global_size});
  }

  /// The prefetch thread: gathers batches in order, each into the slot it will be read from,
  /// waiting while the ring is full.
  void produce() {
    try {
      for (std::size_t k = 0; k < remaining_; ++k) {
        {
          std::unique_lock<std::mutex> lock(mutex_);
          space_.wait(lock, [&] { return stop_ || k < delivered_ + slots_.size(); });
          if (stop_) return;
        }
        fill(slots_[k % slots_.size()], first_ + k);
        {
          std::lock_guard<std::mutex> lock(mutex_);
          ready_ = k + 1;
        }
        filled_.notify_one();
      }
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        error_ = std::current_exception();
      }
      filled_.notify_one();
    }
  }

  /// Joins the prefetch thread, if any, and forgets the epoch's progress.
  void stop() {
    if (thread_.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
      }
      space_.notify_one();
      thread_.join();
    }
    stop_ = false;
    ready_ = 0;
    holding_ = false;
    error_ = nullptr;
  }

  const Dataset<T>* data_;
  LoaderOptions opt_;
  std::size_t samples_ = 0;
  std::size_t batches_ = 0;
  std::vector<Slot> slots_;
  std::vector<std::uint64_t> order_;  // the epoch's permutation of sample indices
  std::uint64_t epoch_ = 0;
  std::size_t first_ = 0;      // batch the epoch (re)started at
  std::size_t remaining_ = 0;  // batches from first_ to the end of the epoch

  // Shared with the prefetch thread, under mutex_ (the thread reads delivered_, the caller ready_).
  std::mutex mutex_;
  std::condition_variable space_;   // a slot was freed, or stop_
  std::condition_variable filled_;  // a batch was gathered, or error_
  std::size_t delivered_ = 0;  // batches handed out and given back (the held one is not counted)
  std::size_t ready_ = 0;      // batches gathered
  bool holding_ = false;       // the caller holds batch delivered_
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace flotilla::data
#endif  // FLOTILLA_DATA_LOADER_HPP_INCLUDED
