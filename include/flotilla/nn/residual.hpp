// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_NN_RESIDUAL_HPP_INCLUDED
#define FLOTILLA_NN_RESIDUAL_HPP_INCLUDED
// Residual<Block, Shortcut = Identity>: Block(x) + Shortcut(x), He et al.'s residual connection.
//
//   Residual<Block<Conv2D<16, 3, 1, same>, ReLU, Conv2D<16, 3, 1, same>>>            identity shortcut
//   Residual<Block<Conv2D<32, 3, 2, same>, ReLU, Conv2D<32, 3, 1, same>>, Project>   projection
//
// With the identity, the block must keep its input's shape. A block that changes it (more
// channels, a stride of 2) needs a shortcut that changes it the same way: Project is a 1 x 1
// convolution with the block's output channels and the stride that gives its output size (a Dense
// layer for vectors), as in He et al.'s option B; any other spec may be given instead (a Block of a
// 1 x 1 convolution and a normalisation, say). The tensors are named "body.*" and "shortcut.*".
#include <array>
#include <cstddef>
#include <string_view>

#include "flotilla/core/shape.hpp"
#include "flotilla/nn/branches.hpp"
#include "flotilla/nn/conv2d.hpp"
#include "flotilla/nn/dense.hpp"

namespace flotilla {

/// The shortcut of a Residual whose block changes the shape: a learned linear map to the block's
/// output shape (see residual.hpp).
struct Project {};

namespace detail {

struct ResidualJoin {
  template <class BodyOut, class ShortcutOut>
  static constexpr bool check() {
    static_assert(std::is_same_v<BodyOut, ShortcutOut>,
                  "Residual<Block>: the block's output shape differs from the shortcut's (its input's, for the "
                  "identity shortcut), so the two cannot be added: give a projection shortcut, "
                  "Residual<Block, Project>, or make the block keep its input's shape");
    return true;
  }
  template <class BodyOut, class ShortcutOut>
  using output_shape = BodyOut;
};

/// The smallest stride s with (n - 1) / s + 1 == out (a 1 x 1 convolution's output size).
constexpr std::size_t projection_stride(std::size_t n, std::size_t out) noexcept {
  for (std::size_t s = 1; s <= n; ++s)
    if ((n - 1) / s + 1 == out) return s;
  return 0;
}

template <class Shortcut, class In, class Out>
struct shortcut_for {
  using type = Shortcut;
};
template <class In, class Out>
struct shortcut_for<Project, In, Out> {
  static constexpr bool image = ImageShape<In> && ImageShape<Out>;
  static_assert(image || (!ImageShape<In> && !ImageShape<Out>),
                "Residual<Block, Project>: the block turns an image into a vector (or back); Project maps images "
                "to images (a 1 x 1 convolution) or vectors to vectors (Dense): give the shortcut yourself");
  static constexpr std::size_t stride_h = image ? projection_stride(In::dims[image ? 1 : 0], Out::dims[image ? 1 : 0]) : 1;
  static constexpr std::size_t stride_w = image ? projection_stride(In::dims[image ? 2 : 0], Out::dims[image ? 2 : 0]) : 1;
  static_assert(!image || (stride_h != 0 && stride_h == stride_w),
                "Residual<Block, Project>: no 1 x 1 convolution with one stride maps the block's input size to its "
                "output size; give the shortcut yourself");
  using type = std::conditional_t<image, Conv2D<Out::dims[0], 1, (image && stride_h ? stride_h : 1)>, Dense<Out::size>>;
};

}  // namespace detail

template <class Block, class Shortcut = Identity>
struct Residual {
  static constexpr std::string_view name = "Residual";
  static constexpr std::array<std::string_view, 2> labels() noexcept { return {"body", "shortcut"}; }
  template <class In, class T>
  using layer = detail::BranchLayer<
      Residual, detail::ResidualJoin, In, T, Block,
      typename detail::shortcut_for<Shortcut, In, typename Block::template layer<In, T>::output_shape>::type>;
};

}  // namespace flotilla
#endif  // FLOTILLA_NN_RESIDUAL_HPP_INCLUDED
