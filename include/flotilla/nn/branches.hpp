// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_NN_BRANCHES_HPP_INCLUDED
#define FLOTILLA_NN_BRANCHES_HPP_INCLUDED
// Parallel branches over one input, joined into one output:
//
//   Concat<Branches...>  the branches' outputs side by side: along channels for images (which must
//                        all have the same height and width), one after the other for vectors
//                        (GoogLeNet's inception modules, DenseNet's dense blocks);
//   Add<Branches...>     their sum, of outputs of one shape (Residual<Block> is Add<Block, Identity>
//                        with the messages of a residual connection).
//
// A branch is any layer spec: a Block<...> for a chain of them, Identity for the input itself (not
// copied: the join reads the input directly). The branches' parameters follow one another in the
// flat buffer, named "0.weight", "1.bias", ... as PyTorch names a module's.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "flotilla/concepts/layer.hpp"
#include "flotilla/core/layer_args.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/core/shape.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/nn/detail/layer_parts.hpp"

namespace flotilla {

/// The input, unchanged: the branch of a shortcut.
struct Identity {
  template <class In, class T>
  struct layer {
    static_assert(AnyShape<In>, "Identity: input_shape must be a flotilla::Shape");
    using spec = Identity;
    using scalar_type = T;
    using input_shape = In;
    using output_shape = In;
    static constexpr std::string_view name = "Identity";
    static constexpr std::size_t parameter_count = 0;
    static constexpr std::uint64_t forward_flops = 0;
    static constexpr std::uint64_t backward_flops = 0;
    void forward(const ForwardArgs<T>& a) { a.output = a.input; }
    void backward(const BackwardArgs<T>& a) {
      if (a.wants_input_grad()) a.input_grad = a.output_grad;
    }
  };
};

namespace detail {

template <class S>
inline constexpr bool is_identity = std::is_same_v<S, Identity>;

/// Branch outputs added: every branch must produce the same shape.
struct AddJoin {
  template <class Out0, class... Outs>
  static constexpr bool check() {
    static_assert((std::is_same_v<Out0, Outs> && ...),
                  "Add<Branches...>: the branches produce different shapes; they can only be added when every "
                  "branch's output has the same shape (see the shapes in the instantiation below)");
    return true;
  }
  template <class Out0, class... Outs>
  using output_shape = Out0;
};

/// Branch outputs side by side.
struct ConcatJoin {
  template <class Out0, class... Outs>
  static constexpr bool check() {
    static_assert(((ImageShape<Out0> == ImageShape<Outs>) && ...),
                  "Concat<Branches...>: some branches produce images and others vectors; concatenate images with "
                  "images (along channels) or vectors with vectors (put Flatten at the end of the image branches)");
    if constexpr (ImageShape<Out0> && (ImageShape<Outs> && ...)) {
      static_assert(((Out0::dims[1] == Outs::dims[1] && Out0::dims[2] == Outs::dims[2]) && ...),
                    "Concat<Branches...>: the branches produce images of different sizes; images are concatenated "
                    "along channels and must all have the same height and width");
    }
    return true;
  }
  template <class Out0, class... Outs>
  static constexpr auto shape() {
    if constexpr (ImageShape<Out0>) {
      return Shape<(Out0::dims[0] + ... + Outs::dims[0]), Out0::dims[1], Out0::dims[2]>{};
    } else {
      return Shape<(Out0::size + ... + Outs::size)>{};
    }
  }
  template <class Out0, class... Outs>
  using output_shape = decltype(shape<Out0, Outs...>());
};

/// The branches bound to In, run on the same input and joined. `Spec` gives the name, `Labels`
/// the scope of each branch's tensors (empty: their positions).
template <class Spec, class Join, class In, class T, class... Specs>
class BranchLayer {
  static_assert(Join::template check<typename Specs::template layer<In, T>::output_shape...>());
  using parts = LayerParts<typename Specs::template layer<In, T>...>;
  template <std::size_t I>
  using part = typename parts::template part<I>;

  static constexpr auto scoped_tensors = parts::scoped(Spec::labels());
  static constexpr auto names = qualify<qualified_name_chars(scoped_tensors)>(scoped_tensors);

 public:
  static constexpr std::size_t count = parts::size;
  /// The bound branches, as a detail::type_list, and whether branch I is the input itself.
  using layers = type_list<typename Specs::template layer<In, T>...>;
  template <std::size_t I>
  static constexpr bool identity = is_identity<std::tuple_element_t<I, std::tuple<Specs...>>>;
  static constexpr std::array<std::size_t, count> parameter_offsets = parts::parameter_offsets;
  using spec = Spec;
  using scalar_type = T;
  using input_shape = In;
  using output_shape = typename Join::template output_shape<typename Specs::template layer<In, T>::output_shape...>;
  static constexpr std::string_view name = Spec::name;
  static constexpr std::size_t parameter_count = parts::parameter_count;
  static constexpr std::array<TensorSpec, parts::tensor_count> tensors = qualified_tensors(scoped_tensors, names);
  // The join: one pass over the output.
  static constexpr std::uint64_t forward_flops = parts::forward_flops + output_shape::size;
  static constexpr std::uint64_t backward_flops = parts::backward_flops + In::size * (count - 1);

 private:
  template <std::size_t... I>
  static constexpr std::array<std::size_t, count> out_sizes(std::index_sequence<I...>) {
    return {(identity<I> ? 0 : part<I>::output_shape::size)...};
  }

 public:
  // The layout device backends (cuda/composite.hpp) follow. Each branch's output is kept (its
  // backward may need it; the identity's is the input): per sample, its size and offset. For
  // Concat, each branch's channels per pixel and where they start in the joined output.
  static constexpr std::array<std::size_t, count> kept_sizes = out_sizes(std::make_index_sequence<count>{});
  static constexpr std::array<std::size_t, count> kept_offsets = exclusive_prefix_sums(kept_sizes);
  static constexpr std::size_t kept_total = kept_offsets[count - 1] + kept_sizes[count - 1];
  static constexpr bool concat = std::is_same_v<Join, ConcatJoin>;
  /// Pixels of the joined output (a vector is one pixel).
  static constexpr std::size_t join_pixels = ImageShape<output_shape> ? output_shape::dims[1] * output_shape::dims[2] : 1;

 private:
  template <std::size_t... I>
  static constexpr std::array<std::size_t, count> widths(std::index_sequence<I...>) {
    return {(part<I>::output_shape::size / join_pixels)...};
  }

 public:
  static constexpr std::array<std::size_t, count> branch_widths = widths(std::make_index_sequence<count>{});
  static constexpr std::array<std::size_t, count> branch_firsts = exclusive_prefix_sums(branch_widths);

  void initialize(std::span<T> params, Generator& g) const { parts::initialize(layers_, params, g); }

  void forward(const ForwardArgs<T>& a) {
    batch_ = static_cast<std::size_t>(a.input.cols());
    if (outputs_.size() < kept_total * batch_) outputs_.resize(kept_total * batch_);
    for_each_index<count>([&]<std::size_t I>() {
      if constexpr (!identity<I>) {
        ForwardArgs<T> f{a.input, output_of<I>(), parts::template slice<I>(a.params), a.mode, a.sample_ids,
                         detail::mix(a.noise_key, I + 1), a.statistics, a.sample_weight, a.backward_follows};
        std::get<I>(layers_).forward(f);
      }
    });
    if constexpr (concat) {
      for_each_index<count>([&]<std::size_t I>() {
        scatter_columns(branch_output<I>(a.input).data(), a.output.data(), branch_firsts[I], branch_widths[I]);
      });
    } else if constexpr (count == 2) {
      a.output = branch_output<0>(a.input) + branch_output<1>(a.input);  // one pass: a residual connection
    } else {
      a.output = branch_output<0>(a.input);
      for_each_index<count>([&]<std::size_t I>() {
        if constexpr (I > 0) a.output += branch_output<I>(a.input);
      });
    }
  }

  void backward(const BackwardArgs<T>& a) {
    const auto batch = static_cast<Eigen::Index>(batch_);
    const bool wants = a.wants_input_grad();
    if constexpr (concat) {
      if (output_grads_.size() < output_shape::size * batch_) output_grads_.resize(output_shape::size * batch_);
    }
    if (wants && count > 1 && scratch_.size() < In::size * batch_) scratch_.resize(In::size * batch_);
    bool first = true;  // the first branch to give an input gradient writes it, the others add
    for_each_index<count>([&]<std::size_t I>() {
      using L = part<I>;
      const T* dy = a.output_grad.data();
      if constexpr (concat) {
        T* mine = output_grads_.data() + branch_firsts[I] * join_pixels * batch_;
        gather_columns(a.output_grad.data(), mine, branch_firsts[I], branch_widths[I]);
        dy = mine;
      }
      const auto dy_view = ConstMatrixView<T>(dy, static_cast<Eigen::Index>(L::output_shape::size), batch);
      if constexpr (identity<I>) {
        if (!wants) return;
        if (first) {
          a.input_grad = dy_view;
        } else {
          a.input_grad += dy_view;
        }
      } else {
        T* din = !wants ? nullptr : first ? a.input_grad.data() : scratch_.data();
        BackwardArgs<T> b{a.input, ConstMatrixView<T>(output_of<I>().data(), static_cast<Eigen::Index>(L::output_shape::size), batch),
                          dy_view, MatrixView<T>(din, din ? static_cast<Eigen::Index>(In::size) : 0, din ? batch : 0),
                          parts::template slice<I>(a.params), parts::template slice<I>(a.param_grads), a.statistics,
                          a.sample_weight};
        std::get<I>(layers_).backward(b);
        if (!wants) return;
        if (!first) a.input_grad += ConstMatrixView<T>(scratch_.data(), static_cast<Eigen::Index>(In::size), batch);
      }
      first = false;
    });
  }

  template <std::size_t I>
  part<I>& layer() noexcept {
    return std::get<I>(layers_);
  }

 private:
  template <std::size_t I>
  MatrixView<T> output_of() {
    return MatrixView<T>(outputs_.data() + kept_offsets[I] * batch_, static_cast<Eigen::Index>(part<I>::output_shape::size),
                         static_cast<Eigen::Index>(batch_));
  }
  template <std::size_t I>
  ConstMatrixView<T> branch_output(ConstMatrixView<T> input) {
    if constexpr (identity<I>) {
      return input;
    } else {
      const auto out = output_of<I>();
      return ConstMatrixView<T>(out.data(), out.rows(), out.cols());
    }
  }

  // Branch values (width per pixel, `width` x pixels x batch) into the joined output's channels
  // [first, first + width) of every pixel, and back.
  void scatter_columns(const T* from, T* to, std::size_t first, std::size_t width) const {
    const std::size_t all = output_shape::size / join_pixels;
    for (std::size_t p = 0; p < join_pixels * batch_; ++p) std::copy_n(from + p * width, width, to + p * all + first);
  }
  void gather_columns(const T* from, T* to, std::size_t first, std::size_t width) const {
    const std::size_t all = output_shape::size / join_pixels;
    for (std::size_t p = 0; p < join_pixels * batch_; ++p) std::copy_n(from + p * all + first, width, to + p * width);
  }

  typename parts::tuple_type layers_{};
  Buffer<T> outputs_, output_grads_, scratch_;
  std::size_t batch_ = 0;
};

template <class... Specs>
constexpr std::array<std::string_view, sizeof...(Specs)> positions() noexcept {
  return {};
}

}  // namespace detail

/// The branches' outputs side by side (channels for images, one after another for vectors).
template <class... Branches>
struct Concat {
  static_assert(sizeof...(Branches) >= 2, "Concat<Branches...>: give at least two branches");
  static constexpr std::string_view name = "Concat";
  static constexpr auto labels() noexcept { return detail::positions<Branches...>(); }
  template <class In, class T>
  using layer = detail::BranchLayer<Concat, detail::ConcatJoin, In, T, Branches...>;
};

/// The sum of the branches' outputs, which must all have one shape.
template <class... Branches>
struct Add {
  static_assert(sizeof...(Branches) >= 2, "Add<Branches...>: give at least two branches");
  static constexpr std::string_view name = "Add";
  static constexpr auto labels() noexcept { return detail::positions<Branches...>(); }
  template <class In, class T>
  using layer = detail::BranchLayer<Add, detail::AddJoin, In, T, Branches...>;
};

}  // namespace flotilla
#endif  // FLOTILLA_NN_BRANCHES_HPP_INCLUDED
