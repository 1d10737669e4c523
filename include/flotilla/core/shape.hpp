// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_SHAPE_HPP_INCLUDED
#define FLOTILLA_CORE_SHAPE_HPP_INCLUDED
// Compile-time tensor shapes. A sample is either a feature vector, Shape<N>, or an image,
// Shape<C, H, W>. Shapes flow from Input<...> through every layer of a network at compile time.
#include <array>
#include <cstddef>
#include <type_traits>

namespace flotilla {

template <std::size_t... Dims>
struct Shape {
  static_assert(sizeof...(Dims) == 1 || sizeof...(Dims) == 3,
                "flotilla::Shape: a sample is a vector Shape<N> or an image Shape<C, H, W>");
  static_assert(((Dims > 0) && ...), "flotilla::Shape: every dimension must be > 0");
  static constexpr std::size_t rank = sizeof...(Dims);
  static constexpr std::array<std::size_t, rank> dims{Dims...};
  /// Number of scalars in one sample.
  static constexpr std::size_t size = (Dims * ...);
};

namespace detail {
template <class S>
struct is_shape : std::false_type {};
template <std::size_t... D>
struct is_shape<Shape<D...>> : std::true_type {};
}  // namespace detail

/// Any Shape<...>.
template <class S>
concept AnyShape = detail::is_shape<S>::value;

/// A vector shape, Shape<N>.
template <class S>
concept VectorShape = AnyShape<S> && S::rank == 1;

/// An image shape, Shape<C, H, W>. Images are stored channels-last (H, W, C) in memory: one
/// pixel's channels are contiguous, which makes im2col a sequence of contiguous copies.
template <class S>
concept ImageShape = AnyShape<S> && S::rank == 3;

template <ImageShape S>
inline constexpr std::size_t channels_of = S::dims[0];
template <ImageShape S>
inline constexpr std::size_t height_of = S::dims[1];
template <ImageShape S>
inline constexpr std::size_t width_of = S::dims[2];

/// The first element of a Sequential: the shape of one input sample.
/// Input<784> is a vector, Input<1, 28, 28> a one-channel 28x28 image.
template <std::size_t... Dims>
struct Input {
  using shape = Shape<Dims...>;
};

}  // namespace flotilla
#endif  // FLOTILLA_CORE_SHAPE_HPP_INCLUDED
