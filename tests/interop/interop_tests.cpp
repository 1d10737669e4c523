// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The safetensors container and the PyTorch layout of a network's parameters (interop/).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

#include <flotilla/interop/torch.hpp>

#include "nets.hpp"

namespace {

namespace fl = flotilla;
namespace st = flotilla::safetensors;

std::vector<std::byte> bytes_of(std::string_view s) {
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

/// A file of the given header text and `data` bytes after it.
std::vector<std::byte> raw_file(std::string_view header, std::size_t data, std::uint64_t claimed_length = ~std::uint64_t{0}) {
  const std::uint64_t n = claimed_length == ~std::uint64_t{0} ? header.size() : claimed_length;
  std::vector<std::byte> out(8);
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<std::byte>((n >> (8 * i)) & 0xFF);
  const auto h = bytes_of(header);
  out.insert(out.end(), h.begin(), h.end());
  out.resize(out.size() + data, std::byte{0x3F});
  return out;
}

std::string decode_error(const std::vector<std::byte>& file) {
  try {
    (void)st::decode(file, "bad.safetensors");
  } catch (const fl::DataError& e) {
    return e.what();
  }
  return "no error";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::filesystem::path temp_dir() {
  auto d = std::filesystem::temp_directory_path() / ("flotilla_interop_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace

TEST_CASE("safetensors: a file round-trips byte for byte, its header padded to 8 bytes") {
  st::File f;
  f.metadata = {{"format", "pt"}, {"note", "quote \" backslash \\ newline \n tab \t bell \x07 é"}};
  const std::vector<st::DType> types = {st::DType::F32, st::DType::F64, st::DType::I64, st::DType::U8, st::DType::BF16, st::DType::BOOL};
  for (std::size_t i = 0; i < types.size(); ++i) {
    st::Tensor t{"t" + std::to_string(i) + (i == 2 ? ".we\"ird\\name" : ""), types[i], {2, i + 1}, {}};
    t.bytes.resize(2 * (i + 1) * st::size_of(types[i]));
    for (std::size_t k = 0; k < t.bytes.size(); ++k) t.bytes[k] = static_cast<std::byte>(k * 7 + i);
    f.tensors.push_back(std::move(t));
  }
  f.tensors.push_back(st::Tensor{"empty", st::DType::F32, {0, 3}, {}});
  f.tensors.push_back(st::Tensor{"scalar", st::DType::F64, {}, std::vector<std::byte>(8, std::byte{1})});
  const auto bytes = st::encode(f);
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < 8; ++i) n |= std::uint64_t{std::to_integer<std::uint8_t>(bytes[i])} << (8 * i);
  CHECK(n % 8 == 0);
  const st::File back = st::decode(bytes, "mem");
  CHECK(back.metadata == f.metadata);
  REQUIRE(back.tensors.size() == f.tensors.size());
  for (std::size_t i = 0; i < f.tensors.size(); ++i) {
    CAPTURE(f.tensors[i].name);
    CHECK(back.tensors[i].name == f.tensors[i].name);
    CHECK(back.tensors[i].dtype == f.tensors[i].dtype);
    CHECK(back.tensors[i].shape == f.tensors[i].shape);
    CHECK(back.tensors[i].bytes == f.tensors[i].bytes);
  }
  CHECK(st::encode(back) == bytes);
  CHECK(back.find("scalar") != nullptr);
  CHECK(back.find("nothing") == nullptr);
}

TEST_CASE("safetensors: the format's own example decodes; tensors may come in any order in the header") {
  // Hugging Face's example header, with the data of its I32 tensor of shape [2, 2].
  const std::string header = R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]},"__metadata__":{"foo":"bar"}})";
  auto file = raw_file(header, 0);
  for (std::int32_t v : {1, -2, 3, 1 << 30}) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    file.insert(file.end(), p, p + 4);
  }
  const st::File f = st::decode(file, "example");
  REQUIRE(f.tensors.size() == 1);
  CHECK(f.metadata.at("foo") == "bar");
  std::int32_t second = 0;
  std::memcpy(&second, f.tensors[0].bytes.data() + 4, 4);
  CHECK(second == -2);
  CHECK(f.tensors[0].offset == 8 + header.size());

  // Described last-first: the tensors come back in the order of their data, \u escapes decoded.
  const std::string reversed =
      R"( { "b" : {"shape":[1],"dtype":"U8","data_offsets":[1,2]}, "\u00e9a\ud83d\ude00" : {"dtype":"U8","shape":[1],"data_offsets":[0,1]} } )";
  const st::File g = st::decode(raw_file(reversed, 2), "reversed");
  REQUIRE(g.tensors.size() == 2);
  CHECK(g.tensors[0].name == "\xc3\xa9" "a\xf0\x9f\x98\x80");
  CHECK(g.tensors[1].name == "b");
}

TEST_CASE("safetensors: a bad file is refused, naming the file, the byte and the tensor") {
  const std::string ok_tensor = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  struct Case {
    const char* name;
    std::vector<std::byte> file;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {"shorter than the length", std::vector<std::byte>(5), {"bad.safetensors (byte 0)", "5 bytes, fewer than the 8"}},
      {"header length past the end", raw_file("{}", 0, 1000), {"(byte 0)", "header's length is 1000 bytes, but only 2 follow"}},
      {"header length beyond the limit", raw_file("{}", 0, 200'000'000), {"200000000 bytes, more than the limit of 100000000"}},
      {"not JSON", raw_file("hello", 0), {"(byte 8)", "the header is not a JSON object"}},
      {"tensor out of bounds", raw_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4),
       {"tensor 'w'", "data_offsets [0, 8] lie outside the 4 bytes of data", "(byte 9)"}},
      {"bytes that do not match the shape", raw_file(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
       {"tensor 'w' of F32 [3] needs 12 bytes, its data_offsets hold 8"}},
      {"overlapping tensors",
       raw_file("{" + ok_tensor + R"(,"v":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
       {"tensor 'v': its data starts at 4, inside the previous tensor's"}},
      {"a gap in the data", raw_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
       {"tensor 'w': its data starts at 4, after a gap from 0"}},
      {"data nobody owns", raw_file("{" + ok_tensor + "}", 12), {"the tensors cover 8 of the 12 bytes of data"}},
      {"an unknown dtype", raw_file(R"({"w":{"dtype":"F8","shape":[2],"data_offsets":[0,2]}})", 2), {"tensor 'w' has the unknown dtype 'F8'"}},
      {"a missing key", raw_file(R"({"w":{"dtype":"F32","shape":[2]}})", 8), {"tensor 'w' lacks \"data_offsets\""}},
      {"an unknown key", raw_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", 8), {"tensor 'w' has an unknown or repeated key 'x'"}},
      {"a tensor described twice", raw_file("{" + ok_tensor + "," + ok_tensor + "}", 8), {"tensor 'w' is described twice"}},
      {"a negative size", raw_file(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), {"expected a non-negative integer"}},
      {"a shape too large", raw_file(R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
       {"tensor 'w' has a shape [4294967296, 4294967296] too large for any file"}},
      {"text after the object", raw_file("{" + ok_tensor + "} x", 8), {"text after the header's JSON object"}},
      {"an unterminated string", raw_file(R"({"w)", 0), {"a string that does not end"}},
      {"a lone surrogate", raw_file(R"({"\udc00":{}})", 0), {"a lone UTF-16 low surrogate"}},
      {"metadata that is not a string", raw_file(R"({"__metadata__":{"a":1}})", 0), {"metadata 'a' is not a string"}},
      {"offsets running backwards", raw_file(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", 4), {"data_offsets [4, 0] run backwards"}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const std::string msg = decode_error(c.file);
    CAPTURE(msg);
    CHECK(contains(msg, "bad.safetensors (byte "));
    for (const auto& e : c.expected) CHECK(contains(msg, e));
  }
}

TEST_CASE("safetensors: write replaces a file whole; a directory that is not there is named") {
  const auto dir = temp_dir();
  st::File f;
  f.tensors.push_back(st::Tensor{"a", st::DType::U8, {3}, bytes_of("xyz")});
  st::write(dir / "a.safetensors", f);
  CHECK(st::read(dir / "a.safetensors").tensors.at(0).bytes == bytes_of("xyz"));
  std::string msg;
  try {
    st::write(dir / "missing" / "a.safetensors", f);
  } catch (const fl::CheckpointError& e) {
    msg = e.what();
  }
  CHECK(contains(msg, "missing/a.safetensors"));
  CHECK(contains(msg, "No such file or directory"));
  std::string read_msg;
  try {
    (void)st::read(dir / "absent.safetensors");
  } catch (const fl::DataError& e) {
    read_msg = e.what();
  }
  CHECK(contains(read_msg, "absent.safetensors (byte 0): cannot open"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("torch layout: each PyTorch element holds the flotilla parameter PyTorch's module reads there") {
  // Dense: PyTorch's weight is [out, in] row-major; flotilla's W(o, i) is column-major.
  using Mlp = fl::Sequential<fl::Input<3>, fl::Dense<2>, fl::ReLU, fl::Dense<4>>;
  const auto mlp = fl::interop::torch_model<Mlp>();
  REQUIRE(mlp.tensors.size() == 4);
  CHECK(mlp.tensors[0].name == "0.weight");
  CHECK(mlp.tensors[0].shape == std::vector<std::uint64_t>{2, 3});
  for (std::size_t o = 0; o < 2; ++o)
    for (std::size_t i = 0; i < 3; ++i) CHECK(mlp.tensors[0].source[o * 3 + i] == o + 2 * i);
  CHECK(mlp.tensors[1].name == "0.bias");
  CHECK(mlp.tensors[2].name == "2.weight");
  CHECK(mlp.tensors[2].source[0] == fl::Network<Mlp>::parameter_offsets[2]);

  // Conv2D: PyTorch's weight is [F, C, K, K]; flotilla's is (F x K*K*C), the channel innermost.
  // Then Flatten: PyTorch flattens (C, H, W), flotilla (H, W, C).
  using Cnn = fl::Sequential<fl::Input<2, 4, 4>, fl::Conv2D<3, 3>, fl::Flatten, fl::Dense<5>>;
  const auto cnn = fl::interop::torch_model<Cnn>();
  REQUIRE(cnn.tensors.size() == 4);
  CHECK(cnn.tensors[0].shape == std::vector<std::uint64_t>{3, 2, 3, 3});
  for (std::size_t f = 0; f < 3; ++f)
    for (std::size_t c = 0; c < 2; ++c)
      for (std::size_t y = 0; y < 3; ++y)
        for (std::size_t x = 0; x < 3; ++x) CHECK(cnn.tensors[0].source[((f * 2 + c) * 3 + y) * 3 + x] == f + 3 * ((y * 3 + x) * 2 + c));
  const std::size_t dense = fl::Network<Cnn>::parameter_offsets[2];
  CHECK(cnn.tensors[2].shape == std::vector<std::uint64_t>{5, 12});  // 3 channels of 2 x 2
  for (std::size_t o = 0; o < 5; ++o)
    for (std::size_t c = 0; c < 3; ++c)
      for (std::size_t h = 0; h < 2; ++h)
        for (std::size_t w = 0; w < 2; ++w)
          CHECK(cnn.tensors[2].source[o * 12 + (c * 2 + h) * 2 + w] == dense + o + 5 * ((h * 2 + w) * 3 + c));
  CHECK(cnn.input_shape == std::vector<std::uint64_t>{2, 4, 4});
}

TEST_CASE("torch layout: every parameter is in exactly one PyTorch element, under flotilla's own tensor names") {
  auto check = [&]<class Net>() {
    using N = fl::Network<Net, float>;
    const auto m = fl::interop::torch_model<Net>();
    std::vector<int> seen(N::parameter_count, 0);
    std::set<std::string> torch_names, flotilla_names;
    for (const auto& t : m.tensors) {
      std::uint64_t n = 1;
      for (const auto d : t.shape) n *= d;
      CHECK(t.source.size() == n);
      REQUIRE(std::all_of(t.source.begin(), t.source.end(), [&](std::size_t i) { return i < seen.size(); }));
      for (const auto i : t.source) ++seen[i];
      torch_names.insert(t.name);
    }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
    for (const auto& t : N::tensors) flotilla_names.insert(std::to_string(t.layer) + "." + std::string(t.name));
    CHECK(torch_names == flotilla_names);
  };
  check.template operator()<interop_nets::Mlp>();
  check.template operator()<interop_nets::Cnn>();
  check.template operator()<interop_nets::ResNet>();
  check.template operator()<interop_nets::Zoo>();
}

TEST_CASE("save/load: a network's parameters round-trip bit for bit, in float and in double") {
  const auto dir = temp_dir();
  {
    const auto p = interop_nets::parameters<interop_nets::Zoo>(3);
    fl::interop::save_safetensors<interop_nets::Zoo>(dir / "zoo.safetensors", std::span<const float>(p), {{"run", "7"}});
    std::vector<float> back(p.size());
    fl::interop::load_safetensors<interop_nets::Zoo>(dir / "zoo.safetensors", std::span<float>(back));
    CHECK(std::memcmp(back.data(), p.data(), p.size() * sizeof(float)) == 0);
    const auto f = st::read(dir / "zoo.safetensors");
    CHECK(f.metadata.at("run") == "7");
    CHECK(f.metadata.at("format") == "pt");
    CHECK(f.metadata.at("flotilla.input_shape") == "[3,8,8]");
    CHECK(contains(f.metadata.at("flotilla.modules"), R"({"type":"Conv2d","in_channels":3,"out_channels":4,"kernel_size":3,"stride":1,"padding":1})"));
    CHECK(contains(f.metadata.at("flotilla.modules"), R"({"type":"LeakyReLU","negative_slope":0.2})"));
  }
  {
    using Net = fl::Sequential<fl::Input<1, 6, 6>, fl::Conv2D<2, 3>, fl::BatchNorm2D<>, fl::Flatten, fl::Dense<3>>;
    using N = fl::Network<Net, double>;
    std::vector<double> p(N::parameter_count);
    N().initialize(p, 5);
    p[N::parameter_offsets[1] + 5] = 0.1 + 0.2;  // a running mean no float holds
    fl::interop::save_safetensors<Net>(dir / "d.safetensors", std::span<const double>(p));
    std::vector<double> back(p.size());
    fl::interop::load_safetensors<Net>(dir / "d.safetensors", std::span<double>(back));
    CHECK(std::memcmp(back.data(), p.data(), p.size() * sizeof(double)) == 0);
    CHECK(st::read(dir / "d.safetensors").tensors.at(0).dtype == st::DType::F64);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("load: a file of another network, dtype or shape is refused naming the tensor; nothing is written") {
  using Net = fl::Sequential<fl::Input<4>, fl::Dense<3>, fl::BatchNorm1D<>, fl::Dense<2>>;
  using N = fl::Network<Net, float>;
  std::vector<float> p(N::parameter_count);
  N().initialize(p, 1);
  const st::File good = [&] {
    const auto dir = temp_dir();
    fl::interop::save_safetensors<Net>(dir / "n.safetensors", std::span<const float>(p));
    st::File f = st::read(dir / "n.safetensors");
    std::filesystem::remove_all(dir);
    return f;
  }();
  auto error_of = [&](const std::function<void(st::File&)>& change) {
    st::File f = st::decode(st::encode(good), "n.safetensors");
    change(f);
    std::vector<float> target(p.size(), 42.0f);
    try {
      fl::interop::load_safetensors<Net>(f, std::span<float>(target));
    } catch (const fl::DataError& e) {
      CHECK(std::all_of(target.begin(), target.end(), [](float v) { return v == 42.0f; }));
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto find = [](st::File& f, const std::string& name) -> st::Tensor& {
    for (auto& t : f.tensors)
      if (t.name == name) return t;
    throw std::runtime_error("no " + name);
  };
  CHECK(contains(error_of([&](st::File& f) {
                   f.tensors.erase(std::find_if(f.tensors.begin(), f.tensors.end(), [](const st::Tensor& t) { return t.name == "1.running_mean"; }));
                 }), "tensor '1.running_mean' is missing"));
  CHECK(contains(error_of([&](st::File& f) {
                   auto& t = find(f, "2.weight");
                   t.dtype = st::DType::F64;
                   t.shape = {1, 2, 3};
                 }),
                 "tensor '2.weight' is F64, this network's parameters are F32"));
  CHECK(contains(error_of([&](st::File& f) { find(f, "0.weight").shape = {4, 3}; }),
                 "tensor '0.weight' has the shape [4, 3], this network's is [3, 4]"));
  CHECK(contains(error_of([&](st::File& f) { f.tensors.push_back(st::Tensor{"9.weight", st::DType::F32, {1}, std::vector<std::byte>(4)}); }),
                 "tensor '9.weight' belongs to no parameter of this network"));
  CHECK(contains(error_of([](st::File&) {}), "no error"));
  // PyTorch's BatchNorm counter is skipped.
  CHECK(error_of([](st::File& f) { f.tensors.push_back(st::Tensor{"1.num_batches_tracked", st::DType::I64, {}, std::vector<std::byte>(8)}); }) ==
        "no error");
  std::vector<float> small(3);
  CHECK_THROWS_AS(fl::interop::load_safetensors<Net>(good, std::span<float>(small)), fl::ShapeError);
}
