// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_NN_BLOCK_HPP_INCLUDED
#define FLOTILLA_NN_BLOCK_HPP_INCLUDED
// Block<Layers...>: a sub-network that is itself a layer spec, so that it can be named and reused:
//
//   template <std::size_t F>
//   using ConvUnit = Block<Conv2D<F, 3, 1, same>, ReLU>;
//   using Net = Sequential<Input<1, 28, 28>, ConvUnit<16>, ConvUnit<16>, MaxPool2D<2>, ...>;
//
// Repeat<N, Spec>: Spec N times in a row, each bound to the shape the one before produces (dlib's
// repeat). Both run their layers as Sequential does; to the network around them they are one layer
// whose parameters are their layers' in order, so the flat buffer, the optimizers, the policies and
// the checkpoints see nothing new, and a pipeline never cuts inside one.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <tuple>

#include "flotilla/concepts/layer.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/core/shape.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/core/layer_args.hpp"
#include "flotilla/nn/detail/layer_parts.hpp"
#include "flotilla/nn/sequential.hpp"

namespace flotilla {
namespace detail {

/// The layers bound from Specs, run one after the other inside one layer. Intermediate
/// activations are kept here until backward; the last layer writes the block's output directly.
template <class Spec, class In, class T, class... Specs>
class LayerChain {
  using bound = bind_chain<In, T, Specs...>;
  using parts = typename parts_of<typename bound::layers>::type;
  template <std::size_t I>
  using part = typename parts::template part<I>;

  template <std::size_t... I>
  static constexpr std::array<std::size_t, parts::size> out_sizes(std::index_sequence<I...>) {
    return {part<I>::output_shape::size...};
  }
  static constexpr auto scoped_tensors = parts::scoped();
  static constexpr auto names = qualify<qualified_name_chars(scoped_tensors)>(scoped_tensors);

 public:
  // The chain's geometry, which device backends (cuda/composite.hpp) run the same way.
  static constexpr std::size_t depth = parts::size;
  static constexpr std::array<std::size_t, depth> parameter_offsets = parts::parameter_offsets;
  static constexpr std::array<std::size_t, depth> output_sizes = out_sizes(std::make_index_sequence<depth>{});
  /// Where each inner activation starts, per sample (the last is the block's output, not kept here).
  static constexpr std::array<std::size_t, depth> activation_offsets = exclusive_prefix_sums(output_sizes);
  /// The largest inner activation (each but the last), per sample: one inner layer's input.
  static constexpr std::size_t widest_inner = [] {
    std::size_t w = 0;
    for (std::size_t i = 0; i + 1 < depth; ++i) w = std::max(w, output_sizes[i]);
    return w;
  }();

  using spec = Spec;  // the spec this layer was bound from (device backends dispatch on it)
  using scalar_type = T;
  using input_shape = In;
  using output_shape = typename bound::output_shape;
  using layers = typename bound::layers;  ///< the bound layers, as a detail::type_list
  static constexpr std::string_view name = Spec::name;
  static constexpr std::size_t parameter_count = parts::parameter_count;
  static constexpr std::array<TensorSpec, parts::tensor_count> tensors = qualified_tensors(scoped_tensors, names);
  static constexpr std::uint64_t forward_flops = parts::forward_flops;
  static constexpr std::uint64_t backward_flops = parts::backward_flops;

  void initialize(std::span<T> params, Generator& g) const { parts::initialize(layers_, params, g); }

  void forward(const ForwardArgs<T>& a) {
    const auto batch = a.input.cols();
    batch_ = static_cast<std::size_t>(batch);
    kept_all_ = a.backward_follows;
    if (kept_all_) {
      // Every activation but the last (which is the block's output), for backward.
      const std::size_t kept = activation_offsets[depth - 1];
      if (activations_.size() < kept * batch_) activations_.resize(kept * batch_);
    } else if (passing_.size() < 2 * widest_inner * batch_) {
      // No backward follows: two activations in turn, the one a layer reads and the one it writes.
      passing_.resize(2 * widest_inner * batch_);
    }
    for_each_index<depth>([&]<std::size_t I>() {
      ForwardArgs<T> f{input_of<I>(a.input), I + 1 == depth ? a.output : activation<I>(),
                       parts::template slice<I>(a.params), a.mode, a.sample_ids, detail::mix(a.noise_key, I + 1),
                       a.statistics, a.sample_weight, a.backward_follows};
      std::get<I>(layers_).forward(f);
    });
  }

  void backward(const BackwardArgs<T>& a) {
    if (!kept_all_)
      throw Error(std::string(name) + "::backward after a forward that no backward was to follow (ForwardArgs::"
                  "backward_follows = false): its inner activations were not kept");
    const auto batch = a.input.cols();
    if (grad_a_.size() < widest_inner * batch_) {
      grad_a_.resize(widest_inner * batch_);
      grad_b_.resize(widest_inner * batch_);
    }
    const T* upstream = a.output_grad.data();
    for_each_index_reverse<depth>([&]<std::size_t I>() {
      using L = part<I>;
      // (A view cannot be re-pointed after construction: assignment copies values.)
      MatrixView<T> din = [&] {
        if constexpr (I > 0) {
          return MatrixView<T>((I % 2 ? grad_a_ : grad_b_).data(), static_cast<Eigen::Index>(L::input_shape::size), batch);
        } else {
          return a.input_grad;
        }
      }();
      const T* out = I + 1 == depth ? a.output.data() : activation<I>().data();
      BackwardArgs<T> b{input_of<I>(a.input), ConstMatrixView<T>(out, static_cast<Eigen::Index>(L::output_shape::size), batch),
                        ConstMatrixView<T>(upstream, static_cast<Eigen::Index>(L::output_shape::size), batch), din,
                        parts::template slice<I>(a.params), parts::template slice<I>(a.param_grads), a.statistics,
                        a.sample_weight};
      std::get<I>(layers_).backward(b);
      upstream = din.data();
    });
  }

  template <std::size_t I>
  part<I>& layer() noexcept {
    return std::get<I>(layers_);
  }

 private:
  template <std::size_t I>
  MatrixView<T> activation() {
    T* at = kept_all_ ? activations_.data() + activation_offsets[I] * batch_ : passing_.data() + (I % 2) * widest_inner * batch_;
    return MatrixView<T>(at, static_cast<Eigen::Index>(output_sizes[I]), static_cast<Eigen::Index>(batch_));
  }
  template <std::size_t I>
  ConstMatrixView<T> input_of(ConstMatrixView<T> block_input) {
    if constexpr (I == 0) {
      return block_input;
    } else {
      const auto a = activation<I - 1>();
      return ConstMatrixView<T>(a.data(), a.rows(), a.cols());
    }
  }

  typename parts::tuple_type layers_{};
  Buffer<T> activations_;  // inner activations kept for backward
  Buffer<T> passing_;      // without a backward to follow: two inner activations in turn
  Buffer<T> grad_a_, grad_b_;
  std::size_t batch_ = 0;
  bool kept_all_ = true;
};

template <class S, std::size_t N, class List = type_list<>>
struct repeat_list {
  using type = typename repeat_list<S, N - 1, typename prepend<S, List>::type>::type;
};
template <class S, class List>
struct repeat_list<S, 0, List> {
  using type = List;
};

template <class Spec, class In, class T, class List>
struct chain_of;
template <class Spec, class In, class T, class... Specs>
struct chain_of<Spec, In, T, type_list<Specs...>> {
  using type = LayerChain<Spec, In, T, Specs...>;
};

}  // namespace detail

/// A named, reusable sub-network: Layers in a row, as one layer spec.
template <class... Specs>
struct Block {
  static_assert(sizeof...(Specs) > 0, "Block<Layers...>: a block needs at least one layer");
  static constexpr std::string_view name = "Block";
  template <class In, class T>
  using layer = detail::LayerChain<Block, In, T, Specs...>;
};

/// Spec N times in a row (N >= 1), each bound to the shape the previous one produces.
template <std::size_t N, class Spec>
struct Repeat {
  static_assert(N > 0, "Repeat<N, Block>: N must be at least 1");
  static constexpr std::string_view name = "Repeat";
  template <class In, class T>
  using layer = typename detail::chain_of<Repeat, In, T, typename detail::repeat_list<Spec, N>::type>::type;
};

}  // namespace flotilla
#endif  // FLOTILLA_NN_BLOCK_HPP_INCLUDED
