// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CUDA_ENGINE_HPP_INCLUDED
#define FLOTILLA_CUDA_ENGINE_HPP_INCLUDED
// cuda::Engine<M>: one rank's compute on a GPU, for Model<Net, Loss, Optimizer, float, device::Cuda>.
// It has train/detail/engine.hpp's interface, and detail::engine_for picks it, so Trainer, the policies,
// the transports and checkpoints work unchanged.
//
// The flat parameter and gradient buffers live in device memory, with page-locked host mirrors
// that the rest of flotilla reads and writes through parameters() and gradients(). Each buffer
// remembers which copy is newer, and copies only when the other side asks:
//   - a single worker trains entirely on the GPU: the optimizer updates the device buffers, and
//     nothing crosses the bus but the batches (and the parameters when a checkpoint is written);
//   - with several workers, backward copies each layer's gradients to the host on a copy stream
//     as soon as that layer is done (an event orders the copy after the layer's kernels), and
//     reports the layer ready once its copy has landed, so the ring allreduce of the last layers
//     runs while the GPU still differentiates the first ones. The summed gradients go back up
//     before the optimizer step.
// The optimizer state of an ElementRuleOptimizer lives on the GPU too (cuda/optimizers.hpp); the
// trainer asks for it (optimizer_state_to_host) before it saves or broadcasts it. Any other
// optimizer runs on the host copies.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "flotilla/concepts/engine.hpp"
#include "flotilla/core/device.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/cuda/buffer.hpp"
#include "flotilla/cuda/codec.hpp"
#include "flotilla/cuda/context.hpp"
#include "flotilla/cuda/loss.hpp"
#include "flotilla/cuda/network.hpp"
#include "flotilla/cuda/optimizers.hpp"
#include "flotilla/loss/mse.hpp"
#include "flotilla/loss/softmax_cross_entropy.hpp"
#include "flotilla/optim/state_tensors.hpp"
#include "flotilla/train/detail/engine.hpp"
#include "flotilla/train/detail/statistics_rendezvous.hpp"
#include "flotilla/transport/launcher.hpp"

namespace flotilla::cuda {

template <ModelType M>
class Engine {
  static_assert(std::is_same_v<typename M::device, device::Cuda>, "cuda::Engine: the model's device must be device::Cuda");
  static_assert(std::is_same_v<typename M::loss, SoftmaxCrossEntropy> || std::is_same_v<typename M::loss, MSE>,
                "cuda::Engine: the GPU backend has the losses SoftmaxCrossEntropy and MSE");

 public:
  using T = float;
  using network_type = Network<typename M::architecture>;
  // What the Engine concept (concepts/engine.hpp) reads its members' types from.
  using model_type = M;
  using scalar_type = T;
  using batch_type = data::Batch<T>;
  using dataset_type = data::Dataset<T>;
  static constexpr std::size_t parameter_count = M::parameter_count;
  static constexpr bool classifier = M::loss::target == TargetKind::labels;
  static constexpr std::size_t input_size = M::input_shape::size;
  static constexpr std::size_t output_size = M::output_shape::size;

  /// `threads` is accepted for the CPU engine's signature; the GPU is one stream. The device:
  /// default_device().
  Engine(std::size_t /*threads*/, std::size_t eval_batch_size, std::uint64_t seed)
      : ctx_(default_device()),
        eval_batch_(std::max<std::size_t>(eval_batch_size, 1)),
        seed_(seed),
        host_params_(parameter_count),
        host_grads_(parameter_count),
        params_(parameter_count),
        grads_(parameter_count),
        layer_copied_(network_type::depth) {
    // The same initial values as the CPU engine: the CPU network's initializers, from the seed.
    flotilla::Network<typename M::architecture, float>{}.initialize(as_span(host_params_), seed);
    std::fill(host_grads_.data(), host_grads_.data() + parameter_count, 0.0f);
    params_where_ = Where::host;
    grads_where_ = Where::host;
  }

  std::span<T> parameters() { return host_view(params_where_, host_params_, params_, true); }
  std::span<const T> parameters() const { return host_view(params_where_, host_params_, params_, false); }
  std::span<T> gradients() { return host_view(grads_where_, host_grads_, grads_, true); }
  std::span<const T> gradients() const { return host_view(grads_where_, host_grads_, grads_, false); }
  std::size_t threads() const noexcept { return 1; }
  std::uint64_t seed() const noexcept { return seed_; }
  void set_seed(std::uint64_t seed) noexcept { seed_ = seed; }
  const Context& context() const noexcept { return ctx_; }

  /// Bytes of the flat buffers that crossed between the host and the GPU since construction
  /// (batches, losses and checkpoints not counted): what tests hold against the theory.
  struct Transfers {
    std::uint64_t gradient_bytes_to_host = 0;     ///< fp32 gradients or their codes, GPU -> host
    std::uint64_t parameter_bytes_to_device = 0;  ///< fp32 parameters or their codes, host -> GPU
  };
  Transfers transfers() const noexcept { return {gradient_bytes_to_host_.load(), parameter_bytes_to_device_.load()}; }

  /// Whether Codec's encoding can be formed on the GPU (the trainer asks before it calls the two
  /// functions below).
  template <class Codec>
  static constexpr bool encodes_on_device = has_device_codec<Codec>;

  /// From now on, a backward with an on_ready callback (the parameter-server push) leaves the fp32
  /// gradients on the GPU and sends only their Codec encoding to the host, layer by layer: half
  /// the bytes for the 16-bit codecs, and no fp32 staged through the host. With `error_feedback`,
  /// what the rounding drops is kept on the GPU and added to the next step's gradients
  /// (codec::ErrorFeedback's arithmetic, bit for bit).
  /// Called again (each fit() calls it), it keeps the residual, as the CPU's error feedback does.
  template <class Codec>
  void encode_gradients_for_push(bool error_feedback) {
    static_assert(has_device_codec<Codec>, "cuda::Engine: no GPU kernel for this codec (fp16, bf16, bf16-truncate)");
    const PushEncoder wanted = error_feedback ? &encode_with_feedback<Codec> : &encode_plain<Codec>;
    if (push_encoder_ == wanted) return;
    ctx_.activate();
    d_codes_.reserve(parameter_count);
    h_codes_.reserve(parameter_count);
    if (error_feedback) {
      d_residual_.reserve(parameter_count);
      FLOTILLA_CUDA_CHECK(cudaMemsetAsync(d_residual_.data(), 0, parameter_count * sizeof(T), ctx_.compute()));
    }
    push_encoder_ = wanted;
  }
  /// The last backward's gradients in the wire format of encode_gradients_for_push's codec (the
  /// whole buffer: 2 bytes per value), valid once on_ready has reported a range.
  std::span<const std::byte> pushed_gradient_codes() const noexcept {
    return std::as_bytes(std::span<const std::uint16_t>(h_codes_.data(), push_encoder_ ? parameter_count : 0));
  }
  /// Parameters [begin, begin + n) from their Codec encoding (`codes`, 2 bytes per value, as
  /// pulled from a parameter server), copied up as they are and decoded on the GPU.
  template <class Codec>
  void decode_pulled_parameters(std::size_t begin, std::span<const std::byte> codes) {
    static_assert(has_device_codec<Codec>, "cuda::Engine: no GPU kernel for this codec (fp16, bf16, bf16-truncate)");
    const std::size_t n = codes.size() / sizeof(std::uint16_t);
    if (codes.size() % sizeof(std::uint16_t) != 0 || begin > parameter_count || n > parameter_count - begin)
      throw ShapeError("cuda::Engine: " + std::to_string(codes.size()) + " bytes of 16-bit codes at parameter " +
                       std::to_string(begin) + " do not fit " + std::to_string(parameter_count) + " parameters");
    ctx_.activate();
    to_device(params_where_, host_params_, params_);  // the rest of the buffer must be current there
    h_param_codes_.reserve(parameter_count);
    d_param_codes_.reserve(parameter_count);
    std::memcpy(h_param_codes_.data() + begin, codes.data(), codes.size());
    FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(d_param_codes_.data() + begin, h_param_codes_.data() + begin, codes.size(),
                                        cudaMemcpyHostToDevice, ctx_.compute()));
    parameter_bytes_to_device_ += codes.size();
    device_decode<Codec>(ctx_.compute(), d_param_codes_.data() + begin, params_.data() + begin, n);
    params_where_ = Where::device;
  }

  /// Copies the GPU's optimizer state into the trainer's host state (before it is saved or sent).
  template <class State>
  void optimizer_state_to_host(State& state) const {
    if (!state_on_device_ || state_host_current_) return;
    ctx_.activate();
    ctx_.synchronize();
    auto buffers = state.buffers();
    for (std::size_t k = 0; k < buffers.size() && k < device_state_.size(); ++k)
      FLOTILLA_CUDA_CHECK(cudaMemcpy(buffers[k].data(), device_state_[k].data(), parameter_count * sizeof(T), cudaMemcpyDeviceToHost));
    state_host_current_ = true;
  }
  /// The trainer replaced or overwrote its host state: the next step reads it from there.
  void optimizer_state_changed() noexcept { state_on_device_ = false; }

  /// One optimizer step. An ElementRuleOptimizer runs on the GPU; any other on the host copies.
  /// State tensors (running statistics) take their increments; the optimizer sees the rest
  /// (optim/state_tensors.hpp).
  template <class O, class State>
  void apply_optimizer(const O& optimizer, State& state, std::span<const TensorInfo> all_tensors, const StepInfo& info) {
    ctx_.activate();
    if constexpr (has_device_update<O>) {
      to_device(params_where_, host_params_, params_);
      to_device(grads_where_, host_grads_, grads_);
      // The state tensors' increments, on the device (optim::take_state_increments on the host).
      const bool has_state = optim::has_state_tensors(all_tensors);
      for (const auto& t : all_tensors) {
        if (t.role != TensorRole::state) continue;
        float* p = params_.data() + t.offset;
        const float* g = grads_.data() + t.offset;
        detail::for_each_index(ctx_.compute(), t.size, "state_increments", [=] __device__(index_t i) { p[i] += g[i]; });
      }
      const std::span<const TensorInfo> tensors = has_state ? optim::trainable_tensors(all_tensors, trainable_) : all_tensors;
      if (!state_on_device_) {
        auto buffers = state.buffers();
        device_state_.clear();
        for (std::size_t k = 0; k < buffers.size(); ++k) {
          device_state_.emplace_back(parameter_count);
          FLOTILLA_CUDA_CHECK(cudaMemcpy(device_state_[k].data(), buffers[k].data(), parameter_count * sizeof(T), cudaMemcpyHostToDevice));
        }
        state_on_device_ = true;
      }
      std::array<float*, device_state_buffers<O> + 1> state_ptrs{};
      for (std::size_t k = 0; k < device_state_.size() && k < device_state_buffers<O>; ++k)
        state_ptrs[k] = device_state_[k].data();
      device_update(ctx_.compute(), optimizer, params_.data(), grads_.data(), state_ptrs.data(), tensors, info);
      params_where_ = Where::device;
      state_host_current_ = false;
    } else {
      optim::update_trainable(optimizer, parameters(), std::span<const T>(gradients()), state, all_tensors, info, trainable_);
    }
  }

  /// How normalisation statistics over the global batch reach the other workers (the CPU
  /// engine's namesake says more); unset, this worker's batch is the global batch.
  void set_statistics_across_workers(flotilla::detail::StatisticsRendezvous::AcrossWorkers f) {
    across_workers_.f = std::move(f);
  }

  /// Forward and backward over `batch` on the GPU. Adds `scale` times the gradient of the batch's
  /// summed loss to the gradients (zeroed first unless `accumulate`). With an on_ready callback,
  /// the gradients are copied to the host layer by layer and reported ready as they land.
  template <class OnReady = flotilla::detail::NoReadyCallback>
  StepResult compute_gradients(const data::Batch<T>& batch, T scale, bool accumulate = false, OnReady&& on_ready = {}) {
    constexpr bool report = !std::is_same_v<std::remove_cvref_t<OnReady>, flotilla::detail::NoReadyCallback>;
    ctx_.activate();
    const std::size_t n = batch.size();
    StepResult r;
    r.samples = n;
    if (n == 0) {
      if constexpr (report) {
        if (push_encoder_) {  // nothing to add, but the push still sends codes (and the residual)
          if (accumulate) {
            to_device(grads_where_, host_grads_, grads_);
          } else {
            FLOTILLA_CUDA_CHECK(cudaMemsetAsync(grads_.data(), 0, parameter_count * sizeof(T), ctx_.compute()));
          }
          grads_where_ = Where::device;
          encode_for_push(0, parameter_count, ctx_.compute());
          ctx_.synchronize();
          for (std::size_t l = network_type::depth; l-- > 0;)
            if (network_type::parameter_counts[l] > 0) on_ready(network_type::parameter_offsets[l]);
          return r;
        }
        to_host(grads_where_, host_grads_, grads_);
        if (!accumulate) std::fill(host_grads_.data(), host_grads_.data() + parameter_count, 0.0f);
        grads_where_ = Where::host;
        for (std::size_t l = network_type::depth; l-- > 0;)
          if (network_type::parameter_counts[l] > 0) on_ready(network_type::parameter_offsets[l]);
      }
      return r;
    }
    to_device(params_where_, host_params_, params_);
    if (accumulate) {
      to_device(grads_where_, host_grads_, grads_);
    } else {
      FLOTILLA_CUDA_CHECK(cudaMemsetAsync(grads_.data(), 0, parameter_count * sizeof(T), ctx_.compute()));
    }
    grads_where_ = Where::device;
    upload_batch(batch.inputs, batch.ids, n);
    if constexpr (classifier) {
      upload_labels(batch.targets.labels, n);
    } else {
      upload_values(batch.targets.values, n);
    }
    const float* out = net_.forward(ctx_, d_inputs_.data(), n, params_.data(), Mode::train, d_ids_.data(), seed_, batch.epoch,
                                    across_workers_.f ? &across_workers_sum_ : nullptr, static_cast<double>(scale));
    d_output_grad_.reserve(output_size * n);
    run_loss(out, n, d_output_grad_.data(), scale);
    enqueue_loss_copy(n);  // ahead of backward on the stream: it lands while backward runs

    if constexpr (report) {
      // Each layer's gradient range goes to the host on the copy stream once its kernels are done.
      net_.backward(ctx_, d_output_grad_.data(), params_.data(), grads_.data(),
                    [&](std::size_t layer, std::size_t offset, std::size_t count) {
                      layer_done_[layer].record(ctx_.compute());
                      FLOTILLA_CUDA_CHECK(cudaStreamWaitEvent(ctx_.copy(), layer_done_[layer].get(), 0));
                      if (push_encoder_) {  // encoded on the copy stream, so compute goes on meanwhile
                        encode_for_push(offset, count, ctx_.copy());
                      } else {
                        FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(host_grads_.data() + offset, grads_.data() + offset,
                                                            count * sizeof(T), cudaMemcpyDeviceToHost, ctx_.copy()));
                        gradient_bytes_to_host_ += count * sizeof(T);
                      }
                      layer_copied_[layer].record(ctx_.copy());
                    });
      // Without codes, the transports now own the host copy; with them, the fp32 values stay here.
      if (!push_encoder_) grads_where_ = Where::host;
      for (std::size_t l = network_type::depth; l-- > 0;) {
        if (network_type::parameter_counts[l] == 0) continue;
        layer_copied_[l].synchronize();
        on_ready(network_type::parameter_offsets[l]);
      }
    } else {
      net_.backward(ctx_, d_output_grad_.data(), params_.data(), grads_.data(), [](std::size_t, std::size_t, std::size_t) {});
    }
    ctx_.synchronize();
    return sum_loss(n);
  }

  /// Loss sum and confusion counts of samples [first, first + count) of `data`, in evaluation mode.
  flotilla::detail::EvaluationPart evaluate(const data::Dataset<T>& data, std::size_t first, std::size_t count) {
    ctx_.activate();
    to_device(params_where_, host_params_, params_);
    flotilla::detail::EvaluationPart part;
    if constexpr (classifier) part.confusion.assign(output_size * output_size, 0);
    for (std::size_t at = first; at < first + count; at += eval_batch_) {
      const std::size_t m = std::min(eval_batch_, first + count - at);
      upload_batch(columns(data.inputs, at, m), {}, m);
      if constexpr (classifier) {
        upload_labels(std::span<const std::int32_t>(data.labels).subspan(at, m), m);
      } else {
        upload_values(columns(data.targets, at, m), m);
      }
      const float* out = net_.forward(ctx_, d_inputs_.data(), m, params_.data(), Mode::eval, d_ids_.data(), seed_, 0);
      run_loss(out, m, nullptr, 0.0f);
      copy_loss_back(m);
      for (std::size_t s = 0; s < m; ++s) {
        part.loss_sum += static_cast<double>(h_loss_.data()[s]);
        if constexpr (classifier)
          ++part.confusion[static_cast<std::size_t>(data.labels[at + s]) * output_size + static_cast<std::size_t>(h_predicted_.data()[s])];
      }
      part.samples += m;
    }
    return part;
  }

  /// The model's outputs ((output size) x samples) for `inputs`.
  Matrix<T> predict(ConstMatrixView<T> inputs) {
    ctx_.activate();
    to_device(params_where_, host_params_, params_);
    const auto n = static_cast<std::size_t>(inputs.cols());
    Matrix<T> result(static_cast<Eigen::Index>(output_size), inputs.cols());
    for (std::size_t first = 0; first < n; first += eval_batch_) {
      const std::size_t m = std::min(eval_batch_, n - first);
      upload_batch(columns(inputs, first, m), {}, m);
      const float* out = net_.forward(ctx_, d_inputs_.data(), m, params_.data(), Mode::eval, d_ids_.data(), seed_, 0);
      FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(result.data() + first * output_size, out, m * output_size * sizeof(T),
                                          cudaMemcpyDeviceToHost, ctx_.compute()));
      ctx_.synchronize();
    }
    return result;
  }

 private:
  /// Which copy of a buffer is newer: both agree, or one side has changed since they last did.
  enum class Where { both, host, device };

  static ConstMatrixView<T> columns(ConstMatrixView<T> m, std::size_t first, std::size_t count) {
    return ConstMatrixView<T>(m.data() + static_cast<std::size_t>(m.rows()) * first, m.rows(), static_cast<Eigen::Index>(count));
  }
  static ConstMatrixView<T> columns(const Matrix<T>& m, std::size_t first, std::size_t count) {
    return columns(ConstMatrixView<T>(m.data(), m.rows(), m.cols()), first, count);
  }

  static int current_device() {
    int d = 0;
    FLOTILLA_CUDA_CHECK(cudaGetDevice(&d));
    return d;
  }

 public:
  /// The device a process trains on: CUDA's current one when the program made another than the
  /// first current; else, when a launcher says which of its host's processes this is
  /// (transport/launcher.hpp: LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID,
  /// FLOTILLA_LOCAL_RANK), the device of that local rank (modulo the devices visible, so that
  /// more processes than devices share them in turn; CUDA_VISIBLE_DEVICES narrows them first).
  static int default_device() {
    const int current = current_device();
    if (current != 0) return current;
    const auto local = transport::launch_environment().local_rank;
    if (!local) return 0;
    int count = 0;
    FLOTILLA_CUDA_CHECK(cudaGetDeviceCount(&count));
    return count > 0 ? static_cast<int>(*local % static_cast<std::size_t>(count)) : 0;
  }

 private:

  void to_device(std::atomic<Where>& where, PinnedBuffer<T>& host, DeviceBuffer<T>& dev) {
    if (where.load() != Where::host) return;
    FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(dev.data(), host.data(), parameter_count * sizeof(T), cudaMemcpyHostToDevice, ctx_.compute()));
    if (&dev == &params_) parameter_bytes_to_device_ += parameter_count * sizeof(T);
    where = Where::both;
  }
  void to_host(std::atomic<Where>& where, PinnedBuffer<T>& host, const DeviceBuffer<T>& dev) const {
    if (where.load() != Where::device) return;
    ctx_.activate();
    FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(host.data(), dev.data(), parameter_count * sizeof(T), cudaMemcpyDeviceToHost, ctx_.compute()));
    ctx_.synchronize();
    if (&dev == &grads_) gradient_bytes_to_host_ += parameter_count * sizeof(T);
    where = Where::both;
  }

  // The push's encoders, as plain functions so that the codec chosen at run time by the trainer
  // needs no template parameter of the engine.
  using PushEncoder = void (*)(cudaStream_t, const float*, float*, std::uint16_t*, std::size_t);
  template <class Codec>
  static void encode_plain(cudaStream_t s, const float* values, float*, std::uint16_t* codes, std::size_t n) {
    device_encode<Codec>(s, values, codes, n);
  }
  template <class Codec>
  static void encode_with_feedback(cudaStream_t s, const float* values, float* residual, std::uint16_t* codes, std::size_t n) {
    device_encode_with_feedback<Codec>(s, values, residual, codes, n);
  }
  /// Encodes gradients [offset, offset + count) on stream s and copies the codes to the host there.
  void encode_for_push(std::size_t offset, std::size_t count, cudaStream_t s) {
    float* residual = d_residual_.size() ? d_residual_.data() + offset : nullptr;
    push_encoder_(s, grads_.data() + offset, residual, d_codes_.data() + offset, count);
    FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(h_codes_.data() + offset, d_codes_.data() + offset, count * sizeof(std::uint16_t),
                                        cudaMemcpyDeviceToHost, s));
    gradient_bytes_to_host_ += count * sizeof(std::uint16_t);
  }
  /// The host copy, current; `writable`: the caller may change it, so the device copy is stale after.
  std::span<T> host_view(std::atomic<Where>& where, PinnedBuffer<T>& host, const DeviceBuffer<T>& dev, bool writable) const {
    to_host(where, host, dev);
    if (writable) where = Where::host;
    return {host.data(), parameter_count};
  }

  void upload_batch(ConstMatrixView<T> inputs, std::span<const std::uint64_t> ids, std::size_t n) {
    if (static_cast<std::size_t>(inputs.rows()) != input_size || static_cast<std::size_t>(inputs.cols()) != n)
      throw ShapeError("cuda::Engine: a batch of " + std::to_string(inputs.rows()) + "x" + std::to_string(inputs.cols()) +
                       " inputs, the model expects " + std::to_string(input_size) + " rows and " + std::to_string(n) + " samples");
    // Through page-locked staging, so that the copy is a true asynchronous DMA.
    ctx_.synchronize();  // the previous batch's staging buffers may still be in flight
    h_inputs_.reserve(input_size * n);
    h_ids_.reserve(n);
    d_inputs_.reserve(input_size * n);
    d_ids_.reserve(n);
    std::memcpy(h_inputs_.data(), inputs.data(), input_size * n * sizeof(T));
    for (std::size_t s = 0; s < n; ++s) h_ids_.data()[s] = ids.empty() ? s : ids[s];
    FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(d_inputs_.data(), h_inputs_.data(), input_size * n * sizeof(T), cudaMemcpyHostToDevice, ctx_.compute()));
    FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(d_ids_.data(), h_ids_.data(), n * sizeof(std::uint64_t), cudaMemcpyHostToDevice, ctx_.compute()));
  }
  void upload_labels(std::span<const std::int32_t> labels, std::size_t n) {
    if (labels.size() != n)
      throw ShapeError("SoftmaxCrossEntropy: " + std::to_string(n) + " outputs but " + std::to_string(labels.size()) + " labels");
    // Checked here, on the host, so that a bad label is the CPU backend's error, not a wild read.
    for (std::size_t s = 0; s < n; ++s)
      if (labels[s] < 0 || static_cast<std::size_t>(labels[s]) >= output_size)
        throw ShapeError("SoftmaxCrossEntropy: label " + std::to_string(labels[s]) + " of sample " + std::to_string(s) +
                         " is outside [0, " + std::to_string(output_size) + ")");
    h_labels_.reserve(n);
    d_labels_.reserve(n);
    std::memcpy(h_labels_.data(), labels.data(), n * sizeof(std::int32_t));
    FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(d_labels_.data(), h_labels_.data(), n * sizeof(std::int32_t), cudaMemcpyHostToDevice, ctx_.compute()));
  }
  void upload_values(ConstMatrixView<T> values, std::size_t n) {
    if (static_cast<std::size_t>(values.rows()) != output_size || static_cast<std::size_t>(values.cols()) != n)
      throw ShapeError("MSE: output is " + std::to_string(output_size) + "x" + std::to_string(n) + " but targets are " +
                       std::to_string(values.rows()) + "x" + std::to_string(values.cols()));
    h_values_.reserve(output_size * n);
    d_values_.reserve(output_size * n);
    std::memcpy(h_values_.data(), values.data(), output_size * n * sizeof(T));
    FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(d_values_.data(), h_values_.data(), output_size * n * sizeof(T), cudaMemcpyHostToDevice, ctx_.compute()));
  }

  void run_loss(const float* out, std::size_t n, float* grad, float scale) {
    d_loss_.reserve(n);
    d_predicted_.reserve(n);
    if constexpr (classifier) {
      detail::softmax_cross_entropy(ctx_.compute(), out, d_labels_.data(), output_size, n, grad, scale, d_loss_.data(),
                                    d_predicted_.data());
    } else {
      detail::mean_squared_error(ctx_.compute(), out, d_values_.data(), output_size, n, grad, scale, d_loss_.data());
    }
  }
  void copy_loss_back(std::size_t n) {
    enqueue_loss_copy(n);
    ctx_.synchronize();
  }
  void enqueue_loss_copy(std::size_t n) {
    h_loss_.reserve(n);
    h_predicted_.reserve(n);
    FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(h_loss_.data(), d_loss_.data(), n * sizeof(float), cudaMemcpyDeviceToHost, ctx_.compute()));
    if constexpr (classifier)
      FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(h_predicted_.data(), d_predicted_.data(), n * sizeof(std::int32_t),
                                          cudaMemcpyDeviceToHost, ctx_.compute()));
  }
  /// Sums the per-sample losses copied back (call after the compute stream has caught up).
  StepResult sum_loss(std::size_t n) const {
    StepResult r;
    double sum = 0;
    for (std::size_t s = 0; s < n; ++s) {
      sum += static_cast<double>(h_loss_.data()[s]);
      if constexpr (classifier) r.correct += h_predicted_.data()[s] == h_labels_.data()[s] ? 1 : 0;
    }
    r.samples = n;
    r.loss = sum / static_cast<double>(n);
    return r;
  }

  Context ctx_;
  std::size_t eval_batch_;
  std::uint64_t seed_;
  mutable PinnedBuffer<T> host_params_, host_grads_;  // a cache of the device buffers, hence mutable
  DeviceBuffer<T> params_, grads_;
  mutable std::atomic<Where> params_where_{Where::host}, grads_where_{Where::host};
  std::vector<DeviceBuffer<T>> device_state_;
  bool state_on_device_ = false;
  mutable bool state_host_current_ = false;
  network_type net_;
  std::vector<Event> layer_done_ = std::vector<Event>(network_type::depth);
  std::vector<Event> layer_copied_;
  DeviceBuffer<T> d_inputs_, d_output_grad_, d_values_, d_loss_;
  DeviceBuffer<std::uint64_t> d_ids_;
  DeviceBuffer<std::int32_t> d_labels_, d_predicted_;
  PinnedBuffer<T> h_inputs_, h_values_, h_loss_;
  PinnedBuffer<std::uint64_t> h_ids_;
  PinnedBuffer<std::int32_t> h_labels_, h_predicted_;
  // The parameter-server push and pull in a 16-bit codec (encode_gradients_for_push).
  PushEncoder push_encoder_ = nullptr;
  DeviceBuffer<std::uint16_t> d_codes_, d_param_codes_;
  PinnedBuffer<std::uint16_t> h_codes_, h_param_codes_;
  DeviceBuffer<T> d_residual_;
  mutable std::atomic<std::uint64_t> gradient_bytes_to_host_{0}, parameter_bytes_to_device_{0};
  std::vector<TensorInfo> trainable_;  // the tensors an update hands the optimizer
  // One GPU is one part of its worker's step: its normalisation statistics meet only the other
  // workers', and only for the global scope.
  struct AcrossWorkers {
    flotilla::detail::StatisticsRendezvous::AcrossWorkers f;
    void operator()(std::span<double> values, StatisticsScope scope) const {
      if (scope == StatisticsScope::global && f) f(values);
    }
  } across_workers_;
  StatisticsSum across_workers_sum_{across_workers_};
};

}  // namespace flotilla::cuda

namespace flotilla::detail {
/// Models on device::Cuda train on cuda::Engine.
template <class M>
struct engine_for<M, device::Cuda> {
  using type = cuda::Engine<M>;
  static_assert(ComputeEngine<type>, "cuda::Engine does not satisfy ComputeEngine (concepts/engine.hpp)");
};
}  // namespace flotilla::detail
#endif  // FLOTILLA_CUDA_ENGINE_HPP_INCLUDED
