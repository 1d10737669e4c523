// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The C++ side of the PyTorch round trip (torch_roundtrip.sh runs it with torch_check.py between):
//
//   torch_roundtrip write DIR    for each network: DIR/NAME.safetensors (save_safetensors), and
//                                DIR/NAME.io.safetensors: 1,000 inputs in PyTorch's layout ("x")
//                                and flotilla's outputs for them ("y")
//   torch_roundtrip check DIR    reads DIR/NAME.torch.safetensors, which PyTorch wrote from the
//                                module it built, with load_safetensors: the parameters must be
//                                the written ones, bit for bit
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include <flotilla/interop/torch.hpp>

#include "nets.hpp"

namespace {

namespace fl = flotilla;
constexpr std::size_t samples = 1000;

/// The inputs of network Net: Fashion-MNIST's first test images where it takes them, else draws.
template <class Net>
fl::Matrix<float> inputs() {
  using In = typename Net::input_shape;
  if constexpr (In::size == 784) {
    auto test = fl::data::fashion_mnist::load<float>(fl::data::Split::test);
    return test.inputs.leftCols(samples);
  } else {
    fl::Matrix<float> x(static_cast<Eigen::Index>(In::size), static_cast<Eigen::Index>(samples));
    fl::Generator g(7);
    for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(static_cast<double>(g() >> 11) * 0x1.0p-53 * 4.0 - 2.0);
    return x;
  }
}

template <class Net>
void write(const std::filesystem::path& dir, const std::string& name, std::uint64_t seed) {
  using N = fl::Network<Net, float>;
  const auto params = interop_nets::parameters<Net>(seed);
  fl::interop::save_safetensors<Net>(dir / (name + ".safetensors"), std::span<const float>(params), {{"test.network", name}});

  // The file read back is the buffer written, bit for bit.
  std::vector<float> back(params.size(), -1.0f);
  fl::interop::load_safetensors<Net>(dir / (name + ".safetensors"), std::span<float>(back));
  if (std::memcmp(back.data(), params.data(), params.size() * sizeof(float)) != 0)
    throw std::runtime_error(name + ": save_safetensors then load_safetensors changed the parameters");

  const fl::Matrix<float> x = inputs<Net>();
  N net;
  fl::RunInfo run;
  run.backward_follows = false;
  const fl::Matrix<float> y = net.forward(fl::ConstMatrixView<float>(x.data(), x.rows(), x.cols()), params, run);

  // x in PyTorch's layout: each sample (C, H, W) where flotilla holds (H, W, C).
  using In = typename Net::input_shape;
  const auto order = fl::interop::torch_order<In>();
  std::vector<float> torch_x(x.size());
  for (std::size_t s = 0; s < samples; ++s)
    for (std::size_t j = 0; j < In::size; ++j) torch_x[s * In::size + order[j]] = x(static_cast<Eigen::Index>(j), static_cast<Eigen::Index>(s));
  fl::safetensors::File io;
  auto tensor = [](std::string tname, std::vector<std::uint64_t> shape, const float* v, std::size_t n) {
    fl::safetensors::Tensor t{std::move(tname), fl::safetensors::DType::F32, std::move(shape), std::vector<std::byte>(n * sizeof(float))};
    std::memcpy(t.bytes.data(), v, n * sizeof(float));
    return t;
  };
  std::vector<std::uint64_t> x_shape{samples};
  for (const auto d : In::dims) x_shape.push_back(d);
  io.tensors.push_back(tensor("x", x_shape, torch_x.data(), torch_x.size()));
  // y: (samples x outputs) row-major is flotilla's column-major (outputs x samples).
  io.tensors.push_back(tensor("y", {samples, static_cast<std::uint64_t>(y.rows())}, y.data(), static_cast<std::size_t>(y.size())));
  fl::safetensors::write(dir / (name + ".io.safetensors"), io);
  std::printf("%s: %zu parameters in %zu tensors written; outputs of %zu samples\n", name.c_str(), params.size(),
              fl::interop::torch_model<Net>().tensors.size(), samples);
}

template <class Net>
bool check(const std::filesystem::path& dir, const std::string& name, std::uint64_t seed) {
  const auto params = interop_nets::parameters<Net>(seed);
  std::vector<float> back(params.size(), -1.0f);
  fl::interop::load_safetensors<Net>(dir / (name + ".torch.safetensors"), std::span<float>(back));
  std::size_t differ = 0;
  for (std::size_t i = 0; i < params.size(); ++i) differ += std::memcmp(&back[i], &params[i], sizeof(float)) != 0;
  std::printf("%s: PyTorch's state_dict read back: %zu of %zu parameters differ\n", name.c_str(), differ, params.size());
  return differ == 0;
}

template <class F>
bool each(F&& f) {
  bool ok = true;
  ok &= f.template operator()<interop_nets::Mlp>("mlp", 11);
  ok &= f.template operator()<interop_nets::Cnn>("cnn", 12);
  ok &= f.template operator()<interop_nets::ResNet>("resnet", 13);
  ok &= f.template operator()<interop_nets::Zoo>("zoo", 14);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc != 3 || (std::strcmp(argv[1], "write") != 0 && std::strcmp(argv[1], "check") != 0)) {
      std::fprintf(stderr, "usage: %s write|check DIR\n", argv[0]);
      return 2;
    }
    const std::filesystem::path dir = argv[2];
    if (std::strcmp(argv[1], "write") == 0)
      return each([&]<class Net>(const std::string& name, std::uint64_t seed) { write<Net>(dir, name, seed); return true; }) ? 0 : 1;
    return each([&]<class Net>(const std::string& name, std::uint64_t seed) { return check<Net>(dir, name, seed); }) ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torch_roundtrip: %s\n", e.what());
    return 1;
  }
}
