// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The single header, then the CUDA engine's separate header, in one translation unit compiled by
// nvcc (not run: the GPU tests are cuda.gpu's). A trainer of a device::Cuda model is instantiated.
#include <flotilla.hpp>
#include <flotilla/cuda/engine.hpp>

namespace {
using Net = flotilla::Sequential<flotilla::Input<1, 28, 28>, flotilla::Conv2D<8, 5>, flotilla::ReLU, flotilla::MaxPool2D<2>,
                                 flotilla::Flatten, flotilla::Dense<10>>;
using Gpu = flotilla::Model<Net, flotilla::SoftmaxCrossEntropy, flotilla::optim::Adam, float, flotilla::device::Cuda>;
[[maybe_unused]] void train_on_gpu(const flotilla::data::Dataset<float>& data) {
  flotilla::Trainer<Gpu> trainer;
  flotilla::FitOptions fit;
  trainer.fit(data, nullptr, fit);
}
}  // namespace
