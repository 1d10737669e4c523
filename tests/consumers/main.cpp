// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The program every consumer project in tests/consumers/ builds: fits y = 3 x0 - 2 x1 + 1 with a
// single Dense layer, MSE and SGD, stepping Network and optim::SGD by hand, and exits non-zero
// unless the loss falls. It includes flotilla as a user would: the umbrella header, or the single
// header when FLOTILLA_CONSUMER_SINGLE_HEADER is defined (then with single_header_tu.cpp, a second
// translation unit on the single header: a definition missing `inline` fails to link). With
// FLOTILLA_SEPARATE_COMPILATION it is built again, with flotilla's out-of-line code compiled once in
// separate_src.cpp instead (include/flotilla/core/linkage.hpp); it calls some of that code.
#ifdef FLOTILLA_CONSUMER_SINGLE_HEADER
#include <flotilla.hpp>
const char* single_header_version();  // single_header_tu.cpp: a second TU on <flotilla.hpp>
#else
#include <flotilla/flotilla.hpp>
// flotilla::flotilla also offers the single header, however it was obtained (parsing it here would
// redefine everything: it is compiled and linked twice over in the single_header consumer).
#if !__has_include(<flotilla.hpp>)
#error "flotilla::flotilla does not put <flotilla.hpp> (the single header) on the include path"
#endif
inline const char* single_header_version() { return "on the include path"; }
#endif

#if defined(FLOTILLA_SEPARATE_COMPILATION) && FLOTILLA_IMPLEMENTATION
#error "with FLOTILLA_SEPARATE_COMPILATION, a translation unit that is not flotilla's source compiles its definitions"
#endif

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <span>
#include <vector>

int main() {
  namespace fl = flotilla;
  using Net = fl::Network<fl::Sequential<fl::Input<2>, fl::Dense<1>>>;
  constexpr int batch = 16;

  std::vector<float> x(2 * batch), y(batch), dy(batch);
  for (int i = 0; i < batch; ++i) {
    x[2 * i] = static_cast<float>(i % 4) / 4.0f - 0.4f;
    x[2 * i + 1] = static_cast<float>(i / 4) / 4.0f - 0.4f;
    y[i] = 3.0f * x[2 * i] - 2.0f * x[2 * i + 1] + 1.0f;
  }
  const fl::ConstMatrixView<float> inputs(x.data(), 2, batch);
  const fl::Targets<float> targets{{}, fl::ConstMatrixView<float>(y.data(), 1, batch)};

  Net net;
  std::vector<float> params(Net::parameter_count), grads(Net::parameter_count);
  net.initialize(params, /*seed=*/42);
  const fl::optim::SGD sgd{.learning_rate = 0.5};
  fl::optim::SGD::state<float> state(Net::parameter_count);

  float first = 0, last = 0;
  for (std::uint64_t step = 1; step <= 200; ++step) {
    const auto out = net.forward(inputs, params);
    const float loss = fl::MSE::value_and_gradient(out, targets, fl::MatrixView<float>(dy.data(), 1, batch),
                                                   1.0f / batch) / batch;
    std::fill(grads.begin(), grads.end(), 0.0f);
    net.backward(fl::ConstMatrixView<float>(dy.data(), 1, batch), params, grads);
    sgd.update(std::span<float>(params), std::span<const float>(grads), state,
               std::span<const fl::TensorInfo>(Net::tensors), fl::StepInfo{step, sgd.learning_rate});
    (step == 1 ? first : last) = loss;
  }
  // Out-of-line code (a training-curve plot): inline in the header-only builds, in
  // separate_src.cpp's object with separate compilation.
  fl::History history(1);
  history[0].epoch = 1;
  history[0].train_loss = last;
  const std::string svg = fl::svg_plot(history, "consumer");
  std::printf("flotilla %s (single header: %s%s): MSE %.3g -> %.3g, plot of %zu bytes\n", FLOTILLA_VERSION_STRING,
              single_header_version(),
#ifdef FLOTILLA_SEPARATE_COMPILATION
              ", separate compilation",
#else
              "",
#endif
              static_cast<double>(first), static_cast<double>(last), svg.size());
  return (last < 1e-4f && last < first && svg.find("<svg") != std::string::npos) ? 0 : 1;
}
