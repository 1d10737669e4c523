// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Every layer's forward and backward on the GPU (cuda::Network) against the CPU backend
// (flotilla::Network) on random inputs and parameters, within 1e-5 relative; the fused softmax
// cross-entropy and MSE; the optimizers' updates; the 16-bit codecs bit for bit; CudaError.
#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cuda/gpu_compare.hpp"
#include "flotilla/codec/bf16.hpp"
#include "flotilla/codec/fp16.hpp"
#include "flotilla/cuda/codec.hpp"
#include "flotilla/cuda/engine.hpp"
#include "flotilla/cuda/loss.hpp"
#include "flotilla/cuda/network.hpp"
#include "flotilla/cuda/optimizers.hpp"
#include "flotilla/flotilla.hpp"
#include "flotilla/nn/avg_pool2d.hpp"
#include "flotilla/nn/global_avg_pool.hpp"

namespace gpu_layers {

namespace {

using namespace flotilla;
using flotilla_test::normal_values;
using flotilla_test::to_device;
using flotilla_test::to_host;

constexpr double tolerance = 1e-5;

/// Runs Arch forward and backward on both devices from the same parameters, inputs, output
/// gradients and dropout keys, and compares outputs, parameter gradients and input gradients.
template <class Arch>
void compare_network(const char* what, Mode mode = Mode::train, std::size_t batch = 9) {
  using CpuNet = flotilla::Network<Arch, float>;
  using GpuNet = cuda::Network<Arch>;
  constexpr std::size_t P = CpuNet::parameter_count, in = CpuNet::input_sizes[0], out = GpuNet::output_size;
  INFO(what);
  const auto params = normal_values(std::max<std::size_t>(P, 1), 1, 0.3);
  const auto x = normal_values(in * batch, 2);
  const auto dy = normal_values(out * batch, 3);
  std::vector<std::uint64_t> ids(batch);
  for (std::size_t s = 0; s < batch; ++s) ids[s] = 1000 + 7 * s;  // not 0..n-1: the ids must be used
  const std::uint64_t seed = 17, epoch = 2;

  CpuNet cpu;
  const std::span<const float> p(params.data(), P);
  const auto y_cpu = cpu.forward(ConstMatrixView<float>(x.data(), in, static_cast<Eigen::Index>(batch)), p,
                                 RunInfo{mode, ids, seed, epoch});
  const std::vector<float> out_cpu(y_cpu.data(), y_cpu.data() + out * batch);
  std::vector<float> grads_cpu(P, 0.0f), dx_cpu(in * batch);
  MatrixView<float> dx_view(dx_cpu.data(), in, static_cast<Eigen::Index>(batch));
  cpu.backward(ConstMatrixView<float>(dy.data(), out, static_cast<Eigen::Index>(batch)), p, grads_cpu, NoHook{}, &dx_view);

  cuda::Context ctx;
  GpuNet gpu;
  auto d_params = to_device<float>(params);
  auto d_x = to_device<float>(x);
  auto d_dy = to_device<float>(dy);
  auto d_ids = to_device<std::uint64_t>(ids);
  cuda::DeviceBuffer<float> d_grads(std::max<std::size_t>(P, 1)), d_dx(in * batch);
  FLOTILLA_CUDA_CHECK(cudaMemset(d_grads.data(), 0, d_grads.bytes()));
  const float* y_gpu = gpu.forward(ctx, d_x.data(), batch, d_params.data(), mode, d_ids.data(), seed, epoch);
  const auto out_gpu = to_host(y_gpu, out * batch);
  std::vector<std::size_t> done;
  gpu.backward(ctx, d_dy.data(), d_params.data(), d_grads.data(),
               [&](std::size_t layer, std::size_t, std::size_t) { done.push_back(layer); }, d_dx.data());
  const auto grads_gpu = to_host(d_grads.data(), P);
  const auto dx_gpu = to_host(d_dx.data(), in * batch);

  FLOTILLA_CHECK_CLOSE("output", std::span<const float>(out_gpu), std::span<const float>(out_cpu), tolerance);
  FLOTILLA_CHECK_CLOSE("input gradient", std::span<const float>(dx_gpu), std::span<const float>(dx_cpu), tolerance);
  if constexpr (P > 0) {
    FLOTILLA_CHECK_CLOSE("parameter gradient", std::span<const float>(grads_gpu), std::span<const float>(grads_cpu), tolerance);
    CHECK(!done.empty());
    CHECK(std::is_sorted(done.rbegin(), done.rend()));  // last layer first
  }
}

}  // namespace

TEST_CASE("gpu: Dense forward and backward match the CPU") {
  compare_network<Sequential<Input<20>, Dense<7>>>("Dense<7> on 20");
  compare_network<Sequential<Input<300>, Dense<64>>>("Dense<64> on 300", Mode::train, 70);
}

TEST_CASE("gpu: Conv2D forward and backward match the CPU") {
  compare_network<Sequential<Input<1, 12, 12>, Conv2D<4, 5>>>("Conv2D<4, 5> on 1x12x12");
  compare_network<Sequential<Input<3, 9, 8>, Conv2D<5, 3, 2, 1>>>("Conv2D<5, 3, 2, 1> on 3x9x8");
  compare_network<Sequential<Input<2, 7, 6>, Conv2D<4, 3, 1, same>>>("Conv2D<4, 3, 1, same> on 2x7x6");
  compare_network<Sequential<Input<3, 9, 8>, Conv2D<5, 5, 2, same>>>("Conv2D<5, 5, 2, same> on 3x9x8");
  compare_network<Sequential<Input<2, 6, 6>, Conv2D<3, 3, 1, 2>>>("Conv2D<3, 3, 1, 2> on 2x6x6");
}

TEST_CASE("gpu: MaxPool2D forward and backward match the CPU") {
  compare_network<Sequential<Input<3, 8, 6>, MaxPool2D<2>>>("MaxPool2D<2> (tiling)");
  compare_network<Sequential<Input<2, 7, 7>, MaxPool2D<3, 2>>>("MaxPool2D<3, 2> (overlapping)");
  compare_network<Sequential<Input<1, 5, 7>, MaxPool2D<2>>>("MaxPool2D<2> (ragged edge)");
}

TEST_CASE("gpu: AvgPool2D and GlobalAvgPool forward and backward match the CPU") {
  compare_network<Sequential<Input<3, 8, 6>, AvgPool2D<2>>>("AvgPool2D<2> (tiling)");
  compare_network<Sequential<Input<2, 7, 7>, AvgPool2D<3, 2>>>("AvgPool2D<3, 2> (overlapping)");
  compare_network<Sequential<Input<1, 5, 7>, AvgPool2D<2>>>("AvgPool2D<2> (ragged edge)");
  compare_network<Sequential<Input<2, 8, 7>, AvgPool2D<2, 3>>>("AvgPool2D<2, 3> (stride above the window)");
  compare_network<Sequential<Input<3, 6, 7>, AvgPool2D<3, 2, 1>>>("AvgPool2D<3, 2, 1> (padded)");
  compare_network<Sequential<Input<4, 5, 6>, AvgPool2D<3, 1, 1>>>("AvgPool2D<3, 1, 1> (padded, stride 1)");
  compare_network<Sequential<Input<5, 4, 6>, GlobalAvgPool>>("GlobalAvgPool");
  compare_network<Sequential<Input<64, 7, 7>, GlobalAvgPool>>("GlobalAvgPool, 64 channels", Mode::train, 33);
}

TEST_CASE("gpu: activations, Flatten and Dropout match the CPU") {
  compare_network<Sequential<Input<33>, ReLU>>("ReLU");
  compare_network<Sequential<Input<33>, LeakyReLU<std::ratio<1, 10>>>>("LeakyReLU<0.1>");
  compare_network<Sequential<Input<33>, Tanh>>("Tanh");
  compare_network<Sequential<Input<33>, Sigmoid>>("Sigmoid");
  compare_network<Sequential<Input<33>, GELU>>("GELU");
  compare_network<Sequential<Input<2, 3, 4>, GELU>>("GELU on an image");
  compare_network<Sequential<Input<2, 3, 4>, Flatten>>("Flatten");
  compare_network<Sequential<Input<50>, Dropout<30>>>("Dropout<30> training");
  compare_network<Sequential<Input<50>, Dropout<30>>>("Dropout<30> evaluation", Mode::eval);
}

TEST_CASE("gpu: a small CNN and an MLP end to end match the CPU") {
  compare_network<Sequential<Input<1, 14, 14>, Conv2D<6, 3>, ReLU, MaxPool2D<2>, Conv2D<8, 3, 1, 1>, Tanh, Flatten,
                             Dropout<20>, Dense<10>>>("CNN", Mode::train, 16);
  compare_network<Sequential<Input<3, 12, 12>, Conv2D<6, 3, 1, same>, GELU, AvgPool2D<2>, Conv2D<8, 3, 2, same>, GELU,
                             GlobalAvgPool, Dense<10>>>("CNN with a global average pool", Mode::train, 16);
  compare_network<Sequential<Input<64>, Dense<32>, ReLU, Dense<16>, Sigmoid, Dense<10>>>("MLP", Mode::train, 33);
}

TEST_CASE("gpu: blocks, branches, batch and layer normalisation match the CPU") {
  using Unit = Block<Conv2D<3, 3, 1, 1>, Tanh, Conv2D<3, 3, 1, 1>>;
  compare_network<Sequential<Input<3, 6, 5>, Unit>>("Block");
  compare_network<Sequential<Input<6>, Repeat<3, Residual<Block<Dense<6>, Tanh>>>>>("Repeat of residual blocks");
  compare_network<Sequential<Input<3, 6, 5>, Residual<Unit>>>("Residual, identity");
  compare_network<Sequential<Input<2, 7, 6>, Residual<Block<Conv2D<4, 3, 2, 1>, Tanh>, Project>>>("Residual, projection");
  compare_network<Sequential<Input<2, 5, 4>, Concat<Block<Conv2D<2, 3, 1, 1>, Tanh>, Identity, Conv2D<3, 1>>>>("Concat");
  compare_network<Sequential<Input<5>, Add<Dense<5>, Identity, Block<Dense<5>, Sigmoid>>>>("Add");
  // Training mode: the batch's statistics (the random running estimates are not read).
  compare_network<Sequential<Input<4, 5, 6>, BatchNorm2D<>>>("BatchNorm2D", Mode::train, 9);
  compare_network<Sequential<Input<64, 7, 7>, BatchNorm2D<>>>("BatchNorm2D, 64 channels, many chunks", Mode::train, 140);
  compare_network<Sequential<Input<12>, BatchNorm1D<>>>("BatchNorm1D", Mode::train, 9);
  compare_network<Sequential<Input<12>, LayerNorm<>>>("LayerNorm", Mode::train, 9);
  compare_network<Sequential<Input<8, 9, 10>, LayerNorm<>, Conv2D<3, 3>, LayerNorm<std::ratio<1, 1000>>, Flatten, Dense<4>>>(
      "LayerNorm on images, 720 values a sample", Mode::train, 5);
  compare_network<Sequential<Input<1, 10, 10>, Conv2D<4, 3, 1, 1>, SyncBatchNorm2D, ReLU,
                             Residual<Block<Conv2D<4, 3, 1, 1>, BatchNorm2D<>, ReLU, Conv2D<4, 3, 1, 1>, BatchNorm2D<>>>, ReLU,
                             GlobalAvgPool, Dense<5>>>("a residual network with BatchNorm", Mode::train, 16);
}

TEST_CASE("gpu: fused softmax cross-entropy and MSE match the CPU") {
  constexpr std::size_t classes = 10, batch = 37;
  const auto logits = normal_values(classes * batch, 5, 4.0);
  std::vector<std::int32_t> labels(batch);
  for (std::size_t s = 0; s < batch; ++s) labels[s] = static_cast<std::int32_t>((s * 7) % classes);
  const float scale = 1.0f / batch;
  std::vector<float> grad_cpu(classes * batch);
  const float loss_cpu = SoftmaxCrossEntropy::value_and_gradient<float>(
      ConstMatrixView<float>(logits.data(), classes, batch), Targets<float>{labels},
      MatrixView<float>(grad_cpu.data(), classes, batch), scale);
  auto d_logits = to_device<float>(logits);
  auto d_labels = to_device<std::int32_t>(labels);
  cuda::DeviceBuffer<float> d_grad(classes * batch), d_loss(batch);
  cuda::DeviceBuffer<std::int32_t> d_pred(batch);
  cuda::detail::softmax_cross_entropy(nullptr, d_logits.data(), d_labels.data(), classes, batch, d_grad.data(), scale,
                                      d_loss.data(), d_pred.data());
  const auto grad_gpu = to_host(d_grad.data(), classes * batch);
  const auto loss_gpu = to_host(d_loss.data(), batch);
  const auto pred_gpu = to_host(d_pred.data(), batch);
  double total = 0;
  for (float l : loss_gpu) total += l;
  CHECK(total == doctest::Approx(loss_cpu).epsilon(1e-5));
  FLOTILLA_CHECK_CLOSE("softmax gradient", std::span<const float>(grad_gpu), std::span<const float>(grad_cpu), tolerance);
  for (std::size_t s = 0; s < batch; ++s) {
    Eigen::Index best = 0;
    ConstMatrixView<float>(logits.data(), classes, batch).col(static_cast<Eigen::Index>(s)).maxCoeff(&best);
    CHECK(pred_gpu[s] == best);
  }

  const auto targets = normal_values(classes * batch, 6);
  std::vector<float> mse_grad_cpu(classes * batch);
  const float mse_cpu = MSE::value_and_gradient<float>(ConstMatrixView<float>(logits.data(), classes, batch),
                                                       Targets<float>{{}, ConstMatrixView<float>(targets.data(), classes, batch)},
                                                       MatrixView<float>(mse_grad_cpu.data(), classes, batch), scale);
  auto d_targets = to_device<float>(targets);
  cuda::detail::mean_squared_error(nullptr, d_logits.data(), d_targets.data(), classes, batch, d_grad.data(), scale, d_loss.data());
  const auto mse_grad_gpu = to_host(d_grad.data(), classes * batch);
  const auto mse_loss_gpu = to_host(d_loss.data(), batch);
  double mse_total = 0;
  for (float l : mse_loss_gpu) mse_total += l;
  CHECK(mse_total == doctest::Approx(mse_cpu).epsilon(1e-5));
  FLOTILLA_CHECK_CLOSE("MSE gradient", std::span<const float>(mse_grad_gpu), std::span<const float>(mse_grad_cpu), tolerance);
}

namespace {
/// Three steps of optimizer o on both devices from the same parameters and gradients.
template <class O>
void compare_optimizer(const char* what, const O& o) {
  using Net = flotilla::Network<Sequential<Input<40>, Dense<30>, Dense<5>>, float>;
  constexpr std::size_t P = Net::parameter_count;
  INFO(what);
  auto params = normal_values(P, 7);
  typename O::template state<float> state(P);
  auto d_params = to_device<float>(params);
  std::vector<cuda::DeviceBuffer<float>> d_state(cuda::device_state_buffers<O>);
  for (auto& b : d_state) {
    b = cuda::DeviceBuffer<float>(P);
    FLOTILLA_CUDA_CHECK(cudaMemset(b.data(), 0, b.bytes()));
  }
  float* ptrs[2] = {d_state.size() > 0 ? d_state[0].data() : nullptr, d_state.size() > 1 ? d_state[1].data() : nullptr};
  for (std::uint64_t step = 1; step <= 3; ++step) {
    const auto grads = normal_values(P, 100 + step);
    const StepInfo info{step, o.learning_rate * (1.0 - 0.1 * static_cast<double>(step))};
    o.update(std::span<float>(params), std::span<const float>(grads), state, Net::tensors, info);
    auto d_grads = to_device<float>(grads);
    cuda::device_update(nullptr, o, d_params.data(), d_grads.data(), ptrs, Net::tensors, info);
  }
  const auto gpu = to_host(d_params.data(), P);
  FLOTILLA_CHECK_CLOSE("parameters", std::span<const float>(gpu), std::span<const float>(params), tolerance);
  auto buffers = state.buffers();
  for (std::size_t k = 0; k < d_state.size(); ++k) {
    const auto s = to_host(d_state[k].data(), P);
    FLOTILLA_CHECK_CLOSE("optimizer state", std::span<const float>(s), std::span<const float>(buffers[k].data(), P), tolerance);
  }
}
}  // namespace

TEST_CASE("gpu: optimizer updates match the CPU") {
  optim::SGD sgd;
  sgd.learning_rate = 0.1;
  compare_optimizer("SGD", sgd);
  sgd.weight_decay = 0.01;
  sgd.decay_biases = false;
  compare_optimizer("SGD, weight decay but not on biases", sgd);
  optim::Momentum momentum;
  momentum.weight_decay = 0.001;
  compare_optimizer("Momentum", momentum);
  momentum.nesterov = true;
  momentum.decay_biases = false;
  compare_optimizer("Nesterov", momentum);
  optim::Adam adam;
  adam.weight_decay = 0.01;
  compare_optimizer("Adam", adam);
  optim::AdamW adamw;
  adamw.decay_biases = false;
  compare_optimizer("AdamW", adamw);
}

namespace {
template <class Codec, class Encode>
void compare_codec(const char* what, Encode reference_encode, float (*reference_decode)(std::uint16_t)) {
  INFO(what);
  // Special values, the edges of the formats, and random bit patterns (every class of float).
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.0f, 65520.0f, 1e9f, -1e9f, 6.1e-5f, 5.96e-8f,
                               2.98e-8f, 1e-40f, 3.3895e38f, 3.4e38f, std::bit_cast<float>(0x7f800000u),
                               std::bit_cast<float>(0xff800000u), std::bit_cast<float>(0x7fc00001u),
                               std::bit_cast<float>(0x7f800001u), std::bit_cast<float>(0xffa5a5a5u)};
  flotilla::Generator g(23);
  for (int i = 0; i < (1 << 20); ++i) values.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(g())));
  auto d_values = to_device<float>(values);
  cuda::DeviceBuffer<std::uint16_t> d_codes(values.size());
  cuda::device_encode<Codec>(nullptr, d_values.data(), d_codes.data(), values.size());
  const auto codes = to_host(d_codes.data(), values.size());
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < values.size(); ++i) mismatches += codes[i] != reference_encode(values[i]) ? 1 : 0;
  CHECK(mismatches == 0);
  // Decoding: every one of the 65536 codes, bit for bit; and decode_add.
  std::vector<std::uint16_t> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  auto d_all = to_device<std::uint16_t>(all);
  cuda::DeviceBuffer<float> d_decoded(all.size());
  cuda::device_decode<Codec>(nullptr, d_all.data(), d_decoded.data(), all.size());
  const auto decoded = to_host(d_decoded.data(), all.size());
  mismatches = 0;
  for (std::size_t i = 0; i < all.size(); ++i)
    mismatches += std::bit_cast<std::uint32_t>(decoded[i]) != std::bit_cast<std::uint32_t>(reference_decode(all[i])) ? 1 : 0;
  CHECK(mismatches == 0);
  cuda::device_decode<Codec>(nullptr, d_all.data(), d_decoded.data(), all.size(), /*add=*/true);
  const auto doubled = to_host(d_decoded.data(), all.size());
  mismatches = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const float r = reference_decode(all[i]) + reference_decode(all[i]);
    mismatches += !(std::bit_cast<std::uint32_t>(doubled[i]) == std::bit_cast<std::uint32_t>(r) || (r != r && doubled[i] != doubled[i])) ? 1 : 0;
  }
  CHECK(mismatches == 0);
}
}  // namespace

TEST_CASE("gpu: fp16 and bf16 kernels agree with the CPU codecs bit for bit") {
  compare_codec<codec::Fp16>("fp16", [](float f) { return detail::fp16_from_float(f); }, &detail::float_from_fp16);
  compare_codec<codec::Bf16>("bf16", [](float f) { return detail::bf16_from_float(f); }, &detail::float_from_bf16);
  compare_codec<codec::Bf16Truncate>("bf16-truncate", [](float f) { return detail::bf16_truncate_from_float(f); },
                                     &detail::float_from_bf16);
}

TEST_CASE("gpu: a failing CUDA call throws CudaError naming the call, file and line") {
  try {
    FLOTILLA_CUDA_CHECK(cudaSetDevice(1 << 20));
    FAIL("cudaSetDevice(1 << 20) did not fail");
  } catch (const cuda::CudaError& e) {
    const std::string m = e.what();
    CHECK(m.find("cudaSetDevice(1 << 20)") != std::string::npos);
    CHECK(m.find("test_layers.cu") != std::string::npos);
    CHECK(e.status_name() == "cudaErrorInvalidDevice");
  }
  // The failure is consumed, not left for the next launch check to blame on a kernel.
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK_NOTHROW(FLOTILLA_CUDA_CHECK_LAUNCH("no kernel"));
}

}  // namespace gpu_layers
