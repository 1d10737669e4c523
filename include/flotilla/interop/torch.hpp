// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_INTEROP_TORCH_HPP_INCLUDED
#define FLOTILLA_INTEROP_TORCH_HPP_INCLUDED
// A network's parameters as PyTorch holds them: save_safetensors() writes a file that
// scripts/flotilla_torch.py turns into an nn.Module with its weights loaded, and
// load_safetensors() reads such a file (or one PyTorch wrote from that module) back.
//
// flotilla and PyTorch store the same numbers in other orders: a Dense weight is column-major
// (N x inputs), a convolution's is (F x K*K*C) with the channel innermost, and images are
// channels-last, so Flatten yields (H, W, C) order where PyTorch's gives (C, H, W). Each PyTorch
// tensor is therefore described by the index in flotilla's flat parameter buffer of each of its
// elements, in row-major order: writing is a gather, reading the matching scatter, and the round
// trip is exact. The walk that computes these indices follows each activation's order from the
// input on (an image's elements are always (H, W, C); a vector's are in the order of whatever made
// it), so the layer after a Flatten, a LayerNorm over an image or a BatchNorm1D after a Flatten
// reads its inputs where PyTorch's would.
//
// The file's metadata holds the module tree as JSON ("flotilla.modules"), the input shape and
// layout, from which the script builds the network without any code of the user's. Names follow
// PyTorch's nn.Sequential: "<layer>.weight", "<layer>.<inner>.bias", "<layer>.body.0.weight" in a
// Residual. Layers without a PyTorch counterpart stop the compiler with a message naming them.
#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <numeric>
#include <ratio>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "flotilla/concepts/architecture.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/shape.hpp"
#include "flotilla/interop/safetensors.hpp"
#include "flotilla/nn/activation.hpp"
#include "flotilla/nn/avg_pool2d.hpp"
#include "flotilla/nn/batch_norm.hpp"
#include "flotilla/nn/block.hpp"
#include "flotilla/nn/branches.hpp"
#include "flotilla/nn/conv2d.hpp"
#include "flotilla/nn/dense.hpp"
#include "flotilla/nn/dropout.hpp"
#include "flotilla/nn/flatten.hpp"
#include "flotilla/nn/global_avg_pool.hpp"
#include "flotilla/nn/layer_norm.hpp"
#include "flotilla/nn/maxpool2d.hpp"
#include "flotilla/nn/network.hpp"
#include "flotilla/nn/residual.hpp"

namespace flotilla::interop {

/// One tensor of PyTorch's state_dict: its name, its shape, and for each of its elements
/// (row-major) the index of the flotilla parameter it holds.
struct TorchTensor {
  std::string name;
  std::vector<std::uint64_t> shape;
  std::vector<std::size_t> source;
};

/// A network as PyTorch sees it: the module tree (JSON, read by scripts/flotilla_torch.py) and
/// the tensors of its state_dict, in module order.
struct TorchModel {
  std::string modules;
  std::vector<TorchTensor> tensors;
  std::vector<std::uint64_t> input_shape;  ///< one sample's, as PyTorch takes it: (C, H, W) or (N)
};

namespace detail {

/// For each element of an activation in flotilla's order, its index in PyTorch's.
using Order = std::vector<std::size_t>;

template <class S>
Order natural_order() {
  Order o(S::size);
  if constexpr (ImageShape<S>) {
    constexpr std::size_t C = S::dims[0], H = S::dims[1], W = S::dims[2];
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t w = 0; w < W; ++w)
        for (std::size_t c = 0; c < C; ++c) o[(h * W + w) * C + c] = (c * H + h) * W + w;
  } else {
    std::iota(o.begin(), o.end(), std::size_t{0});
  }
  return o;
}

template <class S>
std::vector<std::uint64_t> dims_of() {
  return std::vector<std::uint64_t>(S::dims.begin(), S::dims.end());
}

inline std::string number(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}
template <class R>
double ratio_value() {
  return static_cast<double>(R::num) / static_cast<double>(R::den);
}

template <class>
inline constexpr bool always_false = false;

template <class F>
struct activation_of;
template <>
struct activation_of<flotilla::detail::ReluFn> {
  static std::string json() { return R"({"type":"ReLU"})"; }
};
template <class Slope>
struct activation_of<flotilla::detail::LeakyReluFn<Slope>> {
  static std::string json() { return R"({"type":"LeakyReLU","negative_slope":)" + number(ratio_value<Slope>()) + "}"; }
};
template <>
struct activation_of<flotilla::detail::TanhFn> {
  static std::string json() { return R"({"type":"Tanh"})"; }
};
template <>
struct activation_of<flotilla::detail::SigmoidFn> {
  static std::string json() { return R"({"type":"Sigmoid"})"; }
};
template <>
struct activation_of<flotilla::detail::GeluFn> {
  static std::string json() { return R"({"type":"GELU"})"; }
};

template <class L>
struct elementwise : std::false_type {};
template <class F, class In, class T>
struct elementwise<flotilla::detail::ElementwiseLayer<F, In, T>> : std::true_type {
  using fn = F;
};

// What a layer's spec is, for the walk to dispatch on.
template <class S>
struct is_dense : std::false_type {};
template <std::size_t N, class I>
struct is_dense<Dense<N, I>> : std::true_type {};
template <class S>
struct is_conv : std::false_type {};
template <std::size_t F, std::size_t K, std::size_t St, std::size_t P, class I>
struct is_conv<Conv2D<F, K, St, P, I>> : std::true_type {};
template <class S>
struct is_max_pool : std::false_type {};
template <std::size_t K, std::size_t St>
struct is_max_pool<MaxPool2D<K, St>> : std::true_type {};
template <class S>
struct is_avg_pool : std::false_type {};
template <std::size_t K, std::size_t St, std::size_t P>
struct is_avg_pool<AvgPool2D<K, St, P>> : std::true_type {};
template <class S>
struct is_dropout : std::false_type {};
template <std::size_t N, std::size_t D>
struct is_dropout<Dropout<N, D>> : std::true_type {};
template <class S>
struct batch_norm_kind {
  static constexpr int dims = 0;
};
template <StatisticsScope Sc, class M, class E>
struct batch_norm_kind<BatchNorm2D<Sc, M, E>> {
  static constexpr int dims = 2;
  using momentum = M;
  using epsilon = E;
};
template <StatisticsScope Sc, class M, class E>
struct batch_norm_kind<BatchNorm1D<Sc, M, E>> {
  static constexpr int dims = 1;
  using momentum = M;
  using epsilon = E;
};
template <class S>
struct is_layer_norm : std::false_type {};
template <class E>
struct is_layer_norm<LayerNorm<E>> : std::true_type {
  using epsilon = E;
};
template <class S>
struct is_chain : std::false_type {};
template <class... Ss>
struct is_chain<Block<Ss...>> : std::true_type {};
template <std::size_t N, class S>
struct is_chain<Repeat<N, S>> : std::true_type {};
template <class S>
struct join_kind {
  static constexpr std::string_view type = "";
};
template <class B, class Sh>
struct join_kind<Residual<B, Sh>> {
  static constexpr std::string_view type = "Residual";
};
template <class... Bs>
struct join_kind<Add<Bs...>> {
  static constexpr std::string_view type = "Add";
};
template <class... Bs>
struct join_kind<Concat<Bs...>> {
  static constexpr std::string_view type = "Concat";
};

/// Walks a network's layers, handing each PyTorch tensor to `sink` as soon as it is known (so
/// that saving a large model holds the element indices of one tensor at a time, not of all).
class TorchWalk {
 public:
  explicit TorchWalk(std::function<void(TorchTensor&&)> sink) : sink_(std::move(sink)) {}

  /// The module JSON of layer L, whose parameters start at `offset`; `order` is its input's
  /// order on entry and its output's on return.
  template <class L>
  std::string layer(const std::string& prefix, std::size_t offset, Order& order) {
    using In [[maybe_unused]] = typename L::input_shape;
    using Out [[maybe_unused]] = typename L::output_shape;
    if constexpr (elementwise<L>::value) {
      return activation_of<typename elementwise<L>::fn>::json();
    } else if constexpr (!requires { typename L::spec; }) {
      static_assert(always_false<L>, "interop: this layer declares no `spec`, so its PyTorch counterpart is unknown");
      return {};
    } else {
      using S = typename L::spec;
      if constexpr (is_dense<S>::value) {
        constexpr std::size_t N = Out::size, inputs = In::size;
        TorchTensor w{prefix + "weight", {N, inputs}, std::vector<std::size_t>(N * inputs)};
        for (std::size_t o = 0; o < N; ++o)
          for (std::size_t j = 0; j < inputs; ++j) w.source[o * inputs + order[j]] = offset + o + N * j;
        sink_(std::move(w));
        add_range(prefix + "bias", {N}, offset + N * inputs);
        order = natural_order<Out>();
        return R"({"type":"Linear","in_features":)" + std::to_string(inputs) + R"(,"out_features":)" + std::to_string(N) + "}";
      } else if constexpr (is_conv<S>::value) {
        constexpr std::size_t F = Out::dims[0], C = In::dims[0], K = L::kernel;
        TorchTensor w{prefix + "weight", {F, C, K, K}, std::vector<std::size_t>(F * C * K * K)};
        for (std::size_t f = 0; f < F; ++f)
          for (std::size_t c = 0; c < C; ++c)
            for (std::size_t y = 0; y < K; ++y)
              for (std::size_t x = 0; x < K; ++x) w.source[((f * C + c) * K + y) * K + x] = offset + f + F * ((y * K + x) * C + c);
        sink_(std::move(w));
        add_range(prefix + "bias", {F}, offset + F * L::patch);
        order = natural_order<Out>();
        return R"({"type":"Conv2d","in_channels":)" + std::to_string(C) + R"(,"out_channels":)" + std::to_string(F) +
               R"(,"kernel_size":)" + std::to_string(K) + R"(,"stride":)" + std::to_string(L::stride) + R"(,"padding":)" +
               std::to_string(L::padding) + "}";
      } else if constexpr (is_max_pool<S>::value) {
        order = natural_order<Out>();
        return R"({"type":"MaxPool2d","kernel_size":)" + std::to_string(L::kernel) + R"(,"stride":)" + std::to_string(L::stride) + "}";
      } else if constexpr (is_avg_pool<S>::value) {
        order = natural_order<Out>();
        // flotilla divides by the whole window, padding included: PyTorch's count_include_pad.
        return R"({"type":"AvgPool2d","kernel_size":)" + std::to_string(L::kernel) + R"(,"stride":)" + std::to_string(L::stride) +
               R"(,"padding":)" + std::to_string(L::padding) + "}";
      } else if constexpr (std::is_same_v<S, GlobalAvgPool>) {
        order = natural_order<Out>();
        return R"({"type":"GlobalAvgPool"})";
      } else if constexpr (std::is_same_v<S, Flatten>) {
        return R"({"type":"Flatten"})";  // PyTorch flattens (C, H, W) as the order already says
      } else if constexpr (std::is_same_v<S, Identity>) {
        return R"({"type":"Identity"})";
      } else if constexpr (is_dropout<S>::value) {
        return R"({"type":"Dropout","p":)" + number(L::rate) + "}";
      } else if constexpr (batch_norm_kind<S>::dims != 0) {
        using K = batch_norm_kind<S>;
        constexpr std::size_t C = L::tensors[0].size;
        for (std::size_t t = 0; t < 4; ++t) {
          TorchTensor p{prefix + std::string(L::tensors[t].name), {C}, std::vector<std::size_t>(C)};
          for (std::size_t j = 0; j < C; ++j) p.source[K::dims == 1 ? order[j] : j] = offset + t * C + j;
          sink_(std::move(p));
        }
        return std::string(R"({"type":"BatchNorm)") + (K::dims == 1 ? "1d" : "2d") + R"(","num_features":)" + std::to_string(C) +
               R"(,"eps":)" + number(ratio_value<typename K::epsilon>()) + R"(,"momentum":)" +
               number(ratio_value<typename K::momentum>()) + "}";
      } else if constexpr (is_layer_norm<S>::value) {
        constexpr std::size_t D = In::size;
        const auto shape = dims_of<In>();
        for (std::size_t t = 0; t < 2; ++t) {
          TorchTensor p{prefix + (t == 0 ? "weight" : "bias"), shape, std::vector<std::size_t>(D)};
          for (std::size_t j = 0; j < D; ++j) p.source[order[j]] = offset + t * D + j;
          sink_(std::move(p));
        }
        return R"({"type":"LayerNorm","normalized_shape":)" + list(shape) + R"(,"eps":)" +
               number(ratio_value<typename is_layer_norm<S>::epsilon>()) + "}";
      } else if constexpr (is_chain<S>::value) {
        return R"({"type":"Sequential","children":)" + chain<typename L::layers>(prefix, offset, L::parameter_offsets, order) + "}";
      } else if constexpr (!join_kind<S>::type.empty()) {
        return join<L, S>(prefix, offset, order);
      } else {
        static_assert(always_false<S>,
                      "interop: this layer has no PyTorch counterpart known to flotilla/interop/torch.hpp (embedding "
                      "tables are saved with the sparse checkpoints, not here)");
        return {};
      }
    }
  }

  /// The layers of a type_list in a row, as a JSON array of modules named by position.
  template <class List, std::size_t N>
  std::string chain(const std::string& prefix, std::size_t offset, const std::array<std::size_t, N>& offsets, Order& order) {
    std::string out = "[";
    flotilla::detail::for_each_index<N>([&]<std::size_t I>() {
      using L = list_element_t<I, List>;
      out += (I ? "," : "") + layer<L>(prefix + std::to_string(I) + ".", offset + offsets[I], order);
    });
    return out + "]";
  }

 private:
  template <class L, class S>
  std::string join(const std::string& prefix, std::size_t offset, Order& order) {
    constexpr auto labels = S::labels();
    constexpr std::size_t count = L::count;
    std::vector<Order> outs;
    std::vector<std::string> modules;
    flotilla::detail::for_each_index<count>([&]<std::size_t I>() {
      using B = list_element_t<I, typename L::layers>;
      const std::string label = labels[I].empty() ? std::to_string(I) : std::string(labels[I]);
      Order o = order;
      modules.push_back(layer<B>(prefix + label + ".", offset + L::parameter_offsets[I], o));
      outs.push_back(std::move(o));
    });
    using Out = typename L::output_shape;
    if (join_kind<S>::type == "Concat") {
      if constexpr (ImageShape<Out>) {
        order = natural_order<Out>();  // along channels: (H, W, C) in flotilla, dim 1 in PyTorch
      } else {
        order.clear();
        std::size_t base = 0;
        for (const auto& o : outs) {
          for (const auto i : o) order.push_back(base + i);
          base += o.size();
        }
      }
    } else {
      for (std::size_t i = 1; i < outs.size(); ++i)
        if (outs[i] != outs[0])
          throw ConfigError("interop: the branches of " + std::string(S::name) + " at '" + prefix +
                            "' produce their values in different orders (one flattens an image, another does not), "
                            "which PyTorch would add element by element: no PyTorch module computes the same sum");
      order = outs[0];
    }
    std::string out = R"({"type":")" + std::string(join_kind<S>::type) + "\"";
    if (join_kind<S>::type == "Residual") return out + R"(,"body":)" + modules[0] + R"(,"shortcut":)" + modules[1] + "}";
    out += R"(,"branches":[)";
    for (std::size_t i = 0; i < modules.size(); ++i) out += (i ? "," : "") + modules[i];
    return out + "]}";
  }

  void add_range(std::string name, std::vector<std::uint64_t> shape, std::size_t first) {
    TorchTensor t{std::move(name), std::move(shape), {}};
    std::size_t n = 1;
    for (const auto d : t.shape) n *= static_cast<std::size_t>(d);
    t.source.resize(n);
    std::iota(t.source.begin(), t.source.end(), first);
    sink_(std::move(t));
  }
  static std::string list(const std::vector<std::uint64_t>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
  }

  template <std::size_t I, class List>
  struct list_element;
  template <std::size_t I, class First, class... Rest>
  struct list_element<I, flotilla::detail::type_list<First, Rest...>>
      : list_element<I - 1, flotilla::detail::type_list<Rest...>> {};
  template <class First, class... Rest>
  struct list_element<0, flotilla::detail::type_list<First, Rest...>> {
    using type = First;
  };
  template <std::size_t I, class List>
  using list_element_t = typename list_element<I, List>::type;

  std::function<void(TorchTensor&&)> sink_;
};

/// The module tree of Arch as JSON, handing its tensors to `sink` in module order.
template <class Arch, class T>
std::string walk_model(std::function<void(TorchTensor&&)> sink) {
  TorchWalk walk(std::move(sink));
  auto order = natural_order<typename Arch::input_shape>();
  return R"({"type":"Sequential","children":)" +
         walk.template chain<typename Arch::template layers<T>>("", 0, Network<Arch, T>::parameter_offsets, order) + "}";
}

}  // namespace detail

/// For each value of one sample of shape S in flotilla's order, its index in PyTorch's: images are
/// (H, W, C) in flotilla and (C, H, W) in PyTorch; vectors are the same in both. Inputs for the
/// module scripts/flotilla_torch.py builds go through it (flotilla_torch.from_flotilla_images does
/// the same in Python).
template <class S>
std::vector<std::size_t> torch_order() {
  static_assert(AnyShape<S>, "torch_order<S>: S must be a flotilla::Shape");
  return detail::natural_order<S>();
}

/// The PyTorch form of architecture Arch in scalar type T.
template <Architecture Arch, class T = float>
TorchModel torch_model() {
  TorchModel m;
  m.modules = detail::walk_model<Arch, T>([&](TorchTensor&& t) { m.tensors.push_back(std::move(t)); });
  m.input_shape = detail::dims_of<typename Arch::input_shape>();
  return m;
}

/// Writes `params` (a Network<Arch, T>'s flat buffer, e.g. Trainer::parameters()) to `path` as
/// safetensors with PyTorch's names, shapes and layouts, and the module tree in the metadata;
/// `metadata` adds entries of the caller's (keys starting with "flotilla." are the library's).
/// The file is replaced at once (safetensors::write). Throws ShapeError for a buffer of another
/// size.
template <Architecture Arch, class T>
void save_safetensors(const std::filesystem::path& path, std::span<const T> params,
                      const std::map<std::string, std::string>& metadata = {}) {
  if (params.size() != Network<Arch, T>::parameter_count)
    throw ShapeError("save_safetensors: " + std::to_string(params.size()) + " values given, the network has " +
                     std::to_string(Network<Arch, T>::parameter_count) + " parameters");
  safetensors::File f;
  f.metadata = metadata;
  f.metadata["format"] = "pt";
  f.metadata["flotilla.modules"] = detail::walk_model<Arch, T>([&](TorchTensor&& t) {
    safetensors::Tensor out{std::move(t.name), safetensors::dtype_of<T>(), std::move(t.shape),
                            std::vector<std::byte>(t.source.size() * sizeof(T))};
    for (std::size_t i = 0; i < t.source.size(); ++i) std::memcpy(out.bytes.data() + i * sizeof(T), &params[t.source[i]], sizeof(T));
    f.tensors.push_back(std::move(out));
  });
  const auto input = detail::dims_of<typename Arch::input_shape>();
  std::string shape = "[";
  for (std::size_t i = 0; i < input.size(); ++i) shape += (i ? "," : "") + std::to_string(input[i]);
  f.metadata["flotilla.input_shape"] = shape + "]";
  f.metadata["flotilla.input_layout"] = input.size() == 3 ? "HWC" : "flat";
  safetensors::write(path, f);
}

/// save_safetensors() of a mutable buffer (Trainer::parameters()) or a vector.
template <Architecture Arch, class T>
  requires(!std::is_const_v<T>)
void save_safetensors(const std::filesystem::path& path, std::span<T> params,
                      const std::map<std::string, std::string>& metadata = {}) {
  save_safetensors<Arch>(path, std::span<const T>(params), metadata);
}
template <Architecture Arch, class T>
void save_safetensors(const std::filesystem::path& path, const std::vector<T>& params,
                      const std::map<std::string, std::string>& metadata = {}) {
  save_safetensors<Arch>(path, std::span<const T>(params), metadata);
}

/// Reads the parameters of Network<Arch, T> from a safetensors file with PyTorch's names and
/// layouts (one save_safetensors() wrote, or PyTorch from the module scripts/flotilla_torch.py
/// built) into `params`. Every tensor the network has must be there with its shape and T's dtype;
/// tensors PyTorch adds that flotilla has no use for (BatchNorm's num_batches_tracked) are
/// skipped, any other is refused. Nothing is written to `params` unless the whole file fits.
/// Throws DataError naming the file and the tensor.
template <Architecture Arch, class T>
void load_safetensors(const safetensors::File& f, std::span<T> params) {
  if (params.size() != Network<Arch, T>::parameter_count)
    throw ShapeError("load_safetensors: a buffer of " + std::to_string(params.size()) + " values, the network has " +
                     std::to_string(Network<Arch, T>::parameter_count) + " parameters");
  auto shape_text = [](const std::vector<std::uint64_t>& s) {
    std::string t = "[";
    for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
    return t + "]";
  };
  std::map<std::string_view, const safetensors::Tensor*> by_name;
  for (const auto& t : f.tensors) by_name.emplace(t.name, &t);
  std::vector<T> staged(params.begin(), params.end());
  std::set<std::string> wanted;
  (void)detail::walk_model<Arch, T>([&](TorchTensor&& want) {
    const auto it = by_name.find(want.name);
    if (it == by_name.end()) throw DataError(f.source, 0, "tensor '" + want.name + "' is missing (a file of another architecture?)");
    const safetensors::Tensor* t = it->second;
    if (t->dtype != safetensors::dtype_of<T>())
      throw DataError(f.source, t->offset, "tensor '" + want.name + "' is " + std::string(safetensors::name(t->dtype)) +
                                               ", this network's parameters are " + std::string(safetensors::name(safetensors::dtype_of<T>())));
    if (t->shape != want.shape)
      throw DataError(f.source, t->offset, "tensor '" + want.name + "' has the shape " + shape_text(t->shape) + ", this network's is " +
                                               shape_text(want.shape));
    for (std::size_t i = 0; i < want.source.size(); ++i) std::memcpy(&staged[want.source[i]], t->bytes.data() + i * sizeof(T), sizeof(T));
    wanted.insert(std::move(want.name));
  });
  for (const auto& t : f.tensors) {
    const bool counter = t.name == "num_batches_tracked" || t.name.ends_with(".num_batches_tracked");
    if (!wanted.contains(t.name) && !counter)
      throw DataError(f.source, t.offset, "tensor '" + t.name + "' belongs to no parameter of this network (a file of another architecture?)");
  }
  std::copy(staged.begin(), staged.end(), params.begin());
}

/// load_safetensors() of the file at `path` (safetensors::read checks it first).
template <Architecture Arch, class T>
void load_safetensors(const std::filesystem::path& path, std::span<T> params) {
  load_safetensors<Arch>(safetensors::read(path), params);
}
template <Architecture Arch, class T>
void load_safetensors(const std::filesystem::path& path, std::vector<T>& params) {
  load_safetensors<Arch>(safetensors::read(path), std::span<T>(params));
}

}  // namespace flotilla::interop
#endif  // FLOTILLA_INTEROP_TORCH_HPP_INCLUDED
