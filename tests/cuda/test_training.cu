// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Training on the GPU through Trainer, against the same job on the CPU: one template argument
// (device::Cuda) switches the device; the seed fixes the same initial parameters, data order and
// dropout masks on both, so the runs agree to float rounding and reach the same accuracy.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <span>
#include <string>

#include "common/quiet_fit.hpp"
#include "common/blobs.hpp"
#include "cuda/gpu_compare.hpp"
#include "flotilla/cuda/engine.hpp"
#include "flotilla/flotilla.hpp"

namespace gpu_training {

namespace {

using namespace flotilla;
using Net = Sequential<Input<36>, Dense<24>, ReLU, Dropout<10>, Dense<3>>;
template <class Opt, class Device>
using Blobs = Model<Net, SoftmaxCrossEntropy, Opt, float, Device>;

template <class M>
TrainerOptions<M> options(std::size_t workers = 1, std::size_t batch = 20) {
  TrainerOptions<M> o;
  o.optimizer.learning_rate = std::is_same_v<typename M::optimizer, optim::Adam> ? 0.01 : 0.05;
  o.batch_size = batch;
  o.seed = 3;
  o.workers = workers;
  return o;
}
using flotilla_test::quiet;

}  // namespace

TEST_CASE("gpu: a seeded run trains as on the CPU") {
  const auto train = flotilla_test::blobs<float>(600, 1), test = flotilla_test::blobs<float>(300, 2);
  Trainer<Blobs<optim::Momentum, device::Cpu>> cpu(options<Blobs<optim::Momentum, device::Cpu>>());
  Trainer<Blobs<optim::Momentum, device::Cuda>> gpu(options<Blobs<optim::Momentum, device::Cuda>>());
  // The same initial parameters (the CPU network's initializers run for both).
  FLOTILLA_CHECK_CLOSE("initial parameters", gpu.parameters(), cpu.parameters(), 0.0);
  cpu.fit(train, nullptr, quiet(1));
  gpu.fit(train, nullptr, quiet(1));
  // 30 steps of float rounding differences: close, not equal.
  FLOTILLA_CHECK_CLOSE("parameters after one epoch", gpu.parameters(), cpu.parameters(), 1e-3);
  cpu.fit(train, nullptr, quiet(2));
  gpu.fit(train, nullptr, quiet(2));
  const Evaluation a = cpu.evaluate(test), b = gpu.evaluate(test);
  INFO("accuracy cpu " << a.accuracy << " gpu " << b.accuracy);
  CHECK(b.accuracy > 0.9);
  CHECK(std::abs(a.accuracy - b.accuracy) <= 0.02);
  CHECK(b.loss == doctest::Approx(a.loss).epsilon(0.05));
  // predict() gives what evaluate() scored.
  const Matrix<float> out = gpu.predict(ConstMatrixView<float>(test.inputs.data(), 36, 5));
  CHECK(out.rows() == 3);
  CHECK(out.cols() == 5);
}

TEST_CASE("gpu: two workers with gradients allreduced during backward match one worker of twice the batch") {
  const auto train = flotilla_test::blobs<float>(400, 4);
  using M = Blobs<optim::Momentum, device::Cuda>;
  Trainer<M> one(options<M>(1, 20)), two(options<M>(2, 10));
  one.fit(train, nullptr, quiet(1));
  two.fit(train, nullptr, quiet(1));
  FLOTILLA_CHECK_CLOSE("parameters", two.parameters(), one.parameters(), 1e-4);
}

TEST_CASE("gpu: a checkpoint restores parameters and the optimizer state kept on the GPU") {
  const auto train = flotilla_test::blobs<float>(300, 5);
  using M = Blobs<optim::Adam, device::Cuda>;
  const auto path = std::filesystem::temp_directory_path() / "flotilla_cuda_checkpoint.flt";
  Trainer<M> a(options<M>());
  a.fit(train, nullptr, quiet(1));
  a.save(path);
  a.fit(train, nullptr, quiet(1));
  Trainer<M> b(options<M>());
  b.load(path);
  b.fit(train, nullptr, quiet(1));
  std::filesystem::remove(path);
  // With the Adam moments restored, the resumed run repeats the uninterrupted one.
  FLOTILLA_CHECK_CLOSE("parameters", b.parameters(), a.parameters(), 1e-6);
}

namespace {
using ParameterServer = policy::Synchronous<topology::ParameterServer>;
template <bool Feedback>
using Fp16Server = policy::Compressed<codec::Fp16, ParameterServer, Feedback>;
}  // namespace

TEST_CASE("gpu: a compressed parameter-server job moves 16-bit codes across the bus and trains as on the CPU") {
  const auto train = flotilla_test::blobs<float>(400, 6);
  using Gpu = Blobs<optim::Momentum, device::Cuda>;
  using Cpu = Blobs<optim::Momentum, device::Cpu>;
  constexpr std::size_t P = Gpu::parameter_count;
  auto two_workers = [](auto o) {
    o.workers = 2;
    o.batch_size = 10;
    return o;
  };

  // fp32 pushes and pulls: the gradients come down and the parameters go up in fp32.
  Trainer<Gpu, ParameterServer> plain(two_workers(options<Gpu>()));
  plain.fit(train, nullptr, quiet(1));
  const std::uint64_t steps = plain.step();
  REQUIRE(steps == 20);
  REQUIRE(plain.engine(0) != nullptr);
  CHECK(plain.engine(0)->transfers().gradient_bytes_to_host == steps * P * sizeof(float));

  auto check = [&](auto& gpu, auto& cpu, const char* what) {
    INFO(what);
    gpu.fit(train, nullptr, quiet(1));
    cpu.fit(train, nullptr, quiet(1));
    REQUIRE(gpu.step() == steps);
    // Only codes cross the bus: 2 bytes per value down for each push, 2 up for each pull, after
    // the parameters' one upload in fp32 at the start.
    for (std::size_t w = 0; w < 2; ++w) {
      CAPTURE(w);
      REQUIRE(gpu.engine(w) != nullptr);
      const auto t = gpu.engine(w)->transfers();
      CHECK(t.gradient_bytes_to_host == steps * P * 2);
      CHECK(t.parameter_bytes_to_device == P * sizeof(float) + steps * P * 2);
    }
    // The same job on the CPU: equal but for float rounding (which may move a value across an
    // fp16 rounding boundary now and then).
    FLOTILLA_CHECK_CLOSE("parameters", gpu.parameters(), cpu.parameters(), 1e-3);
  };
  {
    Trainer<Gpu, Fp16Server<false>> gpu(two_workers(options<Gpu>()));
    Trainer<Cpu, Fp16Server<false>> cpu(two_workers(options<Cpu>()));
    check(gpu, cpu, "fp16");
  }
  {
    // Error feedback's residual lives on the GPU, in the CPU's arithmetic.
    Trainer<Gpu, Fp16Server<true>> gpu(two_workers(options<Gpu>()));
    Trainer<Cpu, Fp16Server<true>> cpu(two_workers(options<Cpu>()));
    check(gpu, cpu, "fp16 with error feedback");
  }
}

}  // namespace gpu_training
