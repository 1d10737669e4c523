// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CUDA_EMBEDDING_HPP_INCLUDED
#define FLOTILLA_CUDA_EMBEDDING_HPP_INCLUDED
// cuda::EmbeddingLookup: flotilla::EmbeddingLookup (nn/embedding.hpp) on the GPU. The batch's
// entries go up once per step (a key per ID, computed on the host with embedding_key, the
// per-(sample, field) offsets and the weights); the device sorts and de-duplicates them with
// Thrust into the distinct keys, ascending, and each entry's slot among them. Only the distinct
// keys come back: they are what a worker pulls from the servers. The pulled rows go up as one
// (keys x dim) block; forward pools from it into the activations, backward writes one coalesced
// gradient per key into a block of the same shape, which comes down for the push.
//
//   flotilla::cuda::EmbeddingLookup lookup;
//   lookup.build(stream, examples, first_field, fields, buckets);    // waits for the keys
//   pull lookup.keys() into rows (device, keys().size() x dim, row-major)
//   lookup.forward(stream, rows, rows_size, dim, Pooling::sum, {act, features, batch}, first_row);
//   ... the dense layers' backward ...
//   lookup.backward(stream, {dact, features, batch}, first_row, dim, Pooling::sum, grad, grad_size);
//
// The numbers are the CPU's: the same keys in the same order, the same slots, forward sums in the
// CPU's order, and gradients that agree to float rounding, identical from run to run (see
// cuda/embedding_steps.hpp for the order of every sum). Kernels are queued on the caller's stream
// without waiting, except build, which returns once the keys are on the host. A lookup's calls
// must be ordered: on one stream, or synchronized between streams.
//
// Thrust brings libcu++'s global namespace `cuda`: after `using namespace flotilla;`, a bare
// `cuda::` is ambiguous in a file that includes this header, so write `flotilla::cuda::`.
#include <thrust/fill.h>
#include <thrust/system/cuda/execution_policy.h>
#include <thrust/system_error.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/cuda/buffer.hpp"
#include "flotilla/cuda/check.hpp"
#include "flotilla/cuda/embedding_steps.hpp"
#include "flotilla/cuda/error.hpp"
#include "flotilla/cuda/launch.hpp"
#include "flotilla/data/ctr_example.hpp"
#include "flotilla/nn/embedding.hpp"

namespace flotilla::cuda {

/// A (rows x cols) column-major float matrix in device memory, with leading dimension rows.
struct DeviceColumns {
  float* data = nullptr;
  std::size_t rows = 0, cols = 0;
};
/// The same, read-only.
struct ConstDeviceColumns {
  const float* data = nullptr;
  std::size_t rows = 0, cols = 0;
};

namespace detail {

/// Thrust's temporary storage (the sort's second buffers, copy_if's counters) from blocks the
/// lookup keeps, so that a steady state neither allocates nor frees device memory (cudaFree waits
/// for the whole device). A block handed back is reused by the next algorithm; that is safe
/// because a lookup's work is ordered on one stream.
class ThrustScratch {
 public:
  using value_type = char;

  char* allocate(std::ptrdiff_t n) {
    const auto bytes = static_cast<std::size_t>(n);
    Block* best = nullptr;
    for (Block& b : blocks_)
      if (!b.used && b.memory.size() >= bytes && (!best || b.memory.size() < best->memory.size())) best = &b;
    if (!best) {
      blocks_.push_back(Block{DeviceBuffer<char>(bytes > 0 ? bytes : 1), false});
      best = &blocks_.back();
    }
    best->used = true;
    return best->memory.data();
  }
  void deallocate(char* p, std::size_t) noexcept {
    for (Block& b : blocks_)
      if (b.memory.data() == p) b.used = false;
  }

 private:
  struct Block {
    DeviceBuffer<char> memory;
    bool used = false;
  };
  std::vector<Block> blocks_;
};

/// Runs f, a sequence of Thrust algorithms, turning Thrust's errors (thrust::system_error, which
/// carries the cudaError_t) into CudaError naming `what`.
template <class F>
void thrust_checked(const char* what, const char* file, int line, F&& f) {
  try {
    f();
  } catch (const thrust::system_error& e) {
    (void)cudaGetLastError();
    const auto status = static_cast<cudaError_t>(e.code().value());
    throw CudaError(what, file, line, e.code().value(), cudaGetErrorName(status), e.what());
  }
}

}  // namespace detail

/// One table's lookups for a batch on the GPU. Buffers grow to the largest batch seen and are
/// reused, so a steady state allocates nothing. Move-only (it owns device memory).
class EmbeddingLookup {
 public:
  EmbeddingLookup() = default;
  EmbeddingLookup(EmbeddingLookup&&) noexcept = default;
  EmbeddingLookup& operator=(EmbeddingLookup&&) noexcept = default;
  EmbeddingLookup(const EmbeddingLookup&) = delete;
  EmbeddingLookup& operator=(const EmbeddingLookup&) = delete;

  /// From fields [first_field, first_field + fields) of examples, keys made on the host with
  /// embedding_key(field, id, buckets), as flotilla::EmbeddingLookup::build does (and with its
  /// errors: ShapeError naming the example and its line, ConfigError for keys that cannot be
  /// told apart). Returns once keys() holds the distinct keys.
  void build(cudaStream_t s, std::span<const data::CtrExample> examples, std::size_t first_field, std::size_t fields,
             std::uint64_t buckets) {
    detail::gather_embedding_entries(examples, first_field, fields, buckets, host_keys_, host_offsets_, host_weights_);
    build(s, examples.size(), fields, host_keys_, host_offsets_, host_weights_);
  }

  /// From entries given directly: entry_keys[e] is entry e's key (any 64-bit value; equal keys share
  /// a row), entries of sample i's field f are [offsets[i * fields + f], offsets[i * fields + f + 1]),
  /// weights[e] is entry e's weight (or weights is empty: all 1). Throws ShapeError when the
  /// offsets do not describe the keys. Returns once keys() holds the distinct keys.
  void build(cudaStream_t s, std::size_t batch, std::size_t fields, std::span<const std::uint64_t> entry_keys,
             std::span<const std::uint32_t> offsets, std::span<const float> weights) {
    detail::check_embedding_entries(batch, fields, entry_keys.size(), offsets, weights.size());
    const std::size_t n = entry_keys.size();
    // Growing a buffer frees the old one: until the index is rebuilt, nothing may point into it.
    index_ = detail::EmbeddingIndex{};
    distinct_ = 0;
    batch_ = batch;
    fields_ = fields;
    entries_ = n;
    offsets_.reserve(offsets.size());
    sorted_keys_.reserve(n + 1);
    weights_.reserve(n + 1);
    for (auto* b : {&order_, &rank_, &slots_, &owner_, &key_start_, &chunk_start_, &key_chunk_}) b->reserve(n + 1);
    keys_.reserve(n + 1);
    FLOTILLA_CUDA_CHECK(
        cudaMemcpyAsync(offsets_.data(), offsets.data(), offsets.size_bytes(), cudaMemcpyHostToDevice, s));
    if (n > 0) {
      FLOTILLA_CUDA_CHECK(
          cudaMemcpyAsync(sorted_keys_.data(), entry_keys.data(), entry_keys.size_bytes(), cudaMemcpyHostToDevice, s));
      if (!weights.empty())
        FLOTILLA_CUDA_CHECK(
            cudaMemcpyAsync(weights_.data(), weights.data(), weights.size_bytes(), cudaMemcpyHostToDevice, s));
    }
    detail::EmbeddingIndex x;
    x.batch = batch;
    x.fields = fields;
    x.entries = n;
    x.sorted_keys = sorted_keys_.data();
    x.offsets = offsets_.data();
    x.weights = weights_.data();
    x.order = order_.data();
    x.rank = rank_.data();
    x.slots = slots_.data();
    x.owner = owner_.data();
    x.key_start = key_start_.data();
    x.chunk_start = chunk_start_.data();
    x.key_chunk = key_chunk_.data();
    x.keys = keys_.data();
    detail::thrust_checked("thrust: sort and de-duplicate the embedding keys", __FILE__, __LINE__, [&] {
      if (n > 0 && weights.empty()) thrust::fill_n(thrust::cuda::par_nosync.on(s), weights_.data(), n, 1.0f);
      detail::index_embedding_entries(thrust::cuda::par_nosync(scratch_).on(s), x);
    });
    host_distinct_.reserve(x.distinct);
    if (x.distinct > 0)
      FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(host_distinct_.data(), keys_.data(), x.distinct * sizeof(std::uint64_t),
                                          cudaMemcpyDeviceToHost, s));
    FLOTILLA_CUDA_CHECK(cudaStreamSynchronize(s));
    // Only a complete build becomes the lookup's batch.
    index_ = x;
    distinct_ = x.distinct;
  }

  std::size_t batch() const noexcept { return batch_; }
  std::size_t fields() const noexcept { return fields_; }
  /// Number of IDs in the batch (entries).
  std::size_t entries() const noexcept { return entries_; }
  /// The distinct keys, ascending, on the host: the rows to pull, in the order forward expects them.
  std::span<const std::uint64_t> keys() const noexcept { return {host_distinct_.data(), distinct_}; }

  /// Device arrays of the last build: the distinct keys [keys().size()], each entry's slot among
  /// them [entries()], the offsets [batch() * fields() + 1] and the weights [entries()].
  const std::uint64_t* device_keys() const noexcept { return keys_.data(); }
  const std::uint32_t* device_slots() const noexcept { return slots_.data(); }
  const std::uint32_t* device_offsets() const noexcept { return offsets_.data(); }
  const float* device_weights() const noexcept { return weights_.data(); }

  /// Pooled forward, as flotilla::embedding_forward: for each sample i and field f, rows
  /// [first_row + f*dim, first_row + (f+1)*dim) of column i of `out` become the sum over the
  /// field's IDs of weight * rows[slot] (divided by their number for Pooling::mean; an empty field
  /// gives zeros). `rows` is keys().size() x dim, row-major, of `rows_size` values, in device
  /// memory. Other rows of `out` are left as they are. Throws ShapeError on mismatched shapes.
  void forward(cudaStream_t s, const float* rows, std::size_t rows_size, std::size_t dim, Pooling pooling,
               DeviceColumns out, std::size_t first_row) const {
    check_shapes("cuda::EmbeddingLookup::forward", rows_size, dim, out.rows, out.cols, first_row);
    detail::thrust_checked("thrust: embedding forward", __FILE__, __LINE__, [&] {
      detail::pool_embedding_rows(thrust::cuda::par_nosync.on(s), index_, rows, dim, pooling, out.data, out.rows,
                                  first_row);
    });
  }

  /// Backward, as flotilla::embedding_backward: grad_rows (keys().size() x dim, row-major, of
  /// `grad_size` values, device memory) += for every entry, weight * the rows of its field in its
  /// sample's column of dout (divided by the field's number of IDs for Pooling::mean), one
  /// coalesced gradient per key, summed in a fixed order. Throws ShapeError on mismatched shapes.
  void backward(cudaStream_t s, ConstDeviceColumns dout, std::size_t first_row, std::size_t dim, Pooling pooling,
                float* grad_rows, std::size_t grad_size) {
    check_shapes("cuda::EmbeddingLookup::backward", grad_size, dim, dout.rows, dout.cols, first_row);
    partial_.reserve(index_.chunks * dim);
    detail::thrust_checked("thrust: embedding backward", __FILE__, __LINE__, [&] {
      detail::coalesce_embedding_gradients(thrust::cuda::par_nosync(scratch_).on(s), index_, dout.data, dout.rows,
                                           first_row, dim, pooling, partial_.data(), grad_rows);
    });
  }

 private:
  void check_shapes(const char* what, std::size_t rows_size, std::size_t dim, std::size_t out_rows,
                    std::size_t out_cols, std::size_t first_row) const {
    if (!built())
      throw ShapeError(std::string(what) + ": the lookup holds no batch; build() it first");
    if (rows_size != distinct_ * dim)
      throw ShapeError(std::string(what) + ": " + std::to_string(distinct_) + " keys of " + std::to_string(dim) +
                       " values need " + std::to_string(distinct_ * dim) + " row values, got " +
                       std::to_string(rows_size));
    if (out_cols != batch_ || out_rows < first_row + fields_ * dim)
      throw ShapeError(std::string(what) + ": " + std::to_string(batch_) + " samples of " + std::to_string(fields_) +
                       " fields x " + std::to_string(dim) + " values from row " + std::to_string(first_row) +
                       " need a matrix of at least " + std::to_string(first_row + fields_ * dim) + " x " +
                       std::to_string(batch_) + ", got " + std::to_string(out_rows) + " x " + std::to_string(out_cols));
  }
  bool built() const noexcept { return index_.offsets != nullptr; }

  std::size_t batch_ = 0, fields_ = 0, entries_ = 0, distinct_ = 0;
  detail::EmbeddingIndex index_;
  DeviceBuffer<std::uint64_t> sorted_keys_, keys_;
  DeviceBuffer<std::uint32_t> offsets_, order_, rank_, slots_, owner_, key_start_, chunk_start_, key_chunk_;
  DeviceBuffer<float> weights_, partial_;
  PinnedBuffer<std::uint64_t> host_distinct_;
  detail::ThrustScratch scratch_;
  // Staging of build(examples): kept for their capacity.
  std::vector<std::uint64_t> host_keys_;
  std::vector<std::uint32_t> host_offsets_;
  std::vector<float> host_weights_;
};

}  // namespace flotilla::cuda
#endif  // FLOTILLA_CUDA_EMBEDDING_HPP_INCLUDED
