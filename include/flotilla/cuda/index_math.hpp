// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CUDA_INDEXMATH_HPP_INCLUDED
#define FLOTILLA_CUDA_INDEXMATH_HPP_INCLUDED
// The index arithmetic of the CUDA kernels, as functions that compile for the host too: the GPU
// runs exactly these, and the CPU tests (tests/cuda/test_index_math.cpp) check them against the CPU
// layers, so the layouts agree without a GPU to prove it. No CUDA needed.
//
// Layouts are the CPU backend's: activations (features x batch) column-major, one sample per
// column; images channels-last, value (y, x, c) of a sample at (y * W + x) * C + c; a convolution
// patch value p = (ky * K + kx) * C + c, so the im2col matrix of a sample is (patch x pixels) with
// column q = oy * OW + ox, and the weights W (F x patch) column-major, as in nn/conv2d.hpp.
#include <cstddef>
#include <cstdint>

#include "flotilla/core/host_device.hpp"
#include "flotilla/core/random.hpp"

namespace flotilla::cuda {

using index_t = std::int64_t;

/// Grid size for a grid-stride loop over n elements, `threads` per block; the cap keeps the grid
/// legal for any n (each thread then takes several elements).
constexpr unsigned launch_blocks(std::size_t n, unsigned threads = 256) noexcept {
  const std::size_t blocks = (n + threads - 1) / threads;
  constexpr std::size_t cap = std::size_t{1} << 20;
  return static_cast<unsigned>(blocks == 0 ? 1 : (blocks < cap ? blocks : cap));
}

/// Shape of a Conv2D<F, K, S, P> on images Shape<C, H, W>.
struct ConvGeometry {
  index_t C, H, W, F, K, S, P;
  constexpr index_t OH() const noexcept { return (H + 2 * P - K) / S + 1; }
  constexpr index_t OW() const noexcept { return (W + 2 * P - K) / S + 1; }
  constexpr index_t patch() const noexcept { return K * K * C; }
  constexpr index_t pixels() const noexcept { return OH() * OW(); }
  constexpr index_t in_size() const noexcept { return H * W * C; }
  constexpr index_t out_size() const noexcept { return pixels() * F; }

  /// Offset in its sample's image of im2col value (p, q), or -1 where the patch lies in the padding.
  FLOTILLA_HOST_DEVICE constexpr index_t im2col_source(index_t p, index_t q) const noexcept {
    const index_t ky = p / (K * C), kx = (p / C) % K, c = p % C;
    const index_t iy = (q / OW()) * S + ky - P, ix = (q % OW()) * S + kx - P;
    if (iy < 0 || iy >= H || ix < 0 || ix >= W) return -1;
    return (iy * W + ix) * C + c;
  }

  /// d(input) at offset i of a sample: the sum of the dcols values (patch x pixels, one sample's)
  /// that im2col copied from i. A gather, so no two threads write one value and the sum's order
  /// is fixed (ky, kx ascending).
  template <class V>
  FLOTILLA_HOST_DEVICE V col2im_gather(index_t i, const V* dcols) const noexcept {
    const index_t c = i % C, ix = (i / C) % W, iy = i / (C * W);
    V sum = 0;
    for (index_t ky = 0; ky < K; ++ky) {
      const index_t ty = iy + P - ky;
      if (ty < 0 || ty % S != 0 || ty / S >= OH()) continue;
      for (index_t kx = 0; kx < K; ++kx) {
        const index_t tx = ix + P - kx;
        if (tx < 0 || tx % S != 0 || tx / S >= OW()) continue;
        const index_t q = (ty / S) * OW() + tx / S;
        sum += dcols[q * patch() + (ky * K + kx) * C + c];
      }
    }
    return sum;
  }
};

/// Conv2D layer type L (from nn/conv2d.hpp) -> its geometry.
template <class L>
constexpr ConvGeometry conv_geometry() noexcept {
  return {static_cast<index_t>(L::C),        static_cast<index_t>(L::H),      static_cast<index_t>(L::W),
          static_cast<index_t>(L::output_shape::dims[0]), static_cast<index_t>(L::kernel),
          static_cast<index_t>(L::stride),   static_cast<index_t>(L::padding)};
}

/// Shape of a MaxPool2D<K, S> on images Shape<C, H, W> (windows past the edge dropped).
struct PoolGeometry {
  index_t C, H, W, K, S;
  constexpr index_t OH() const noexcept { return (H - K) / S + 1; }
  constexpr index_t OW() const noexcept { return (W - K) / S + 1; }
  constexpr index_t in_size() const noexcept { return H * W * C; }
  constexpr index_t out_size() const noexcept { return OH() * OW() * C; }

  /// The maximum of output value o's window in one sample's image x, and where it is (the first
  /// maximum in window order, strict >, as nn/maxpool2d.hpp).
  template <class T>
  FLOTILLA_HOST_DEVICE T window_max(index_t o, const T* x, std::uint32_t& at) const noexcept {
    const index_t c = o % C, ox = (o / C) % OW(), oy = o / (C * OW());
    index_t best_i = (oy * S * W + ox * S) * C + c;
    T best = x[best_i];
    for (index_t ky = 0; ky < K; ++ky)
      for (index_t kx = 0; kx < K; ++kx) {
        const index_t i = ((oy * S + ky) * W + ox * S + kx) * C + c;
        if (x[i] > best) best = x[i], best_i = i;
      }
    at = static_cast<std::uint32_t>(best_i);
    return best;
  }

  /// d(input) at offset i of a sample: the output gradients of the windows whose maximum was i.
  template <class T>
  FLOTILLA_HOST_DEVICE T backward_gather(index_t i, const T* dy, const std::uint32_t* arg) const noexcept {
    const index_t c = i % C, ix = (i / C) % W, iy = i / (C * W);
    // Windows oy with oy * S <= iy < oy * S + K, within [0, OH).
    const index_t oy_hi = iy / S < OH() - 1 ? iy / S : OH() - 1, ox_hi = ix / S < OW() - 1 ? ix / S : OW() - 1;
    const index_t oy_lo = iy >= K ? (iy - K) / S + 1 : 0, ox_lo = ix >= K ? (ix - K) / S + 1 : 0;
    T sum = 0;
    for (index_t oy = oy_lo; oy <= oy_hi; ++oy)
      for (index_t ox = ox_lo; ox <= ox_hi; ++ox) {
        const index_t o = (oy * OW() + ox) * C + c;
        if (arg[o] == static_cast<std::uint32_t>(i)) sum += dy[o];
      }
    return sum;
  }
};

/// MaxPool2D layer type L (from nn/maxpool2d.hpp) -> its geometry.
template <class L>
constexpr PoolGeometry pool_geometry() noexcept {
  return {static_cast<index_t>(L::C), static_cast<index_t>(L::H), static_cast<index_t>(L::W),
          static_cast<index_t>(L::kernel), static_cast<index_t>(L::stride)};
}

/// Shape of an AvgPool2D<K, S, P> on images Shape<C, H, W>: windows past the padded edge dropped,
/// the padding counted as zeros (every window divides by K * K), as nn/avg_pool2d.hpp.
struct AvgPoolGeometry {
  index_t C, H, W, K, S, P;
  constexpr index_t OH() const noexcept { return (H + 2 * P - K) / S + 1; }
  constexpr index_t OW() const noexcept { return (W + 2 * P - K) / S + 1; }
  constexpr index_t in_size() const noexcept { return H * W * C; }
  constexpr index_t out_size() const noexcept { return OH() * OW() * C; }

  /// The mean of output value o's window in one sample's image x, summed in the CPU layer's
  /// order (rows, then columns, of the window's part inside the image).
  template <class T>
  FLOTILLA_HOST_DEVICE T window_mean(index_t o, const T* x) const noexcept {
    const index_t c = o % C, ox = (o / C) % OW(), oy = o / (C * OW());
    const index_t y0 = oy * S - P, x0 = ox * S - P;
    const index_t y_begin = y0 < 0 ? 0 : y0, y_end = y0 + K < H ? y0 + K : H;
    const index_t x_begin = x0 < 0 ? 0 : x0, x_end = x0 + K < W ? x0 + K : W;
    T sum = 0;
    for (index_t iy = y_begin; iy < y_end; ++iy)
      for (index_t ix = x_begin; ix < x_end; ++ix) sum += x[(iy * W + ix) * C + c];
    return sum * (T(1) / T(K * K));
  }

  /// d(input) at offset i of a sample: its share, 1 / (K * K), of the output gradient of every
  /// window that holds it (a gather, in output order: no atomics, the CPU's order of additions).
  template <class T>
  FLOTILLA_HOST_DEVICE T backward_gather(index_t i, const T* dy) const noexcept {
    const index_t c = i % C, ix = (i / C) % W, iy = i / (C * W);
    // Windows oy with oy * S <= iy + P < oy * S + K, within [0, OH).
    const index_t ty = iy + P, tx = ix + P;
    const index_t oy_hi = ty / S < OH() - 1 ? ty / S : OH() - 1, ox_hi = tx / S < OW() - 1 ? tx / S : OW() - 1;
    const index_t oy_lo = ty >= K ? (ty - K) / S + 1 : 0, ox_lo = tx >= K ? (tx - K) / S + 1 : 0;
    const T scale = T(1) / T(K * K);
    T sum = 0;
    for (index_t oy = oy_lo; oy <= oy_hi; ++oy)
      for (index_t ox = ox_lo; ox <= ox_hi; ++ox) sum += dy[(oy * OW() + ox) * C + c] * scale;
    return sum;
  }
};

/// AvgPool2D layer type L (from nn/avg_pool2d.hpp) -> its geometry.
template <class L>
constexpr AvgPoolGeometry avg_pool_geometry() noexcept {
  return {static_cast<index_t>(L::C),      static_cast<index_t>(L::H),      static_cast<index_t>(L::W),
          static_cast<index_t>(L::kernel), static_cast<index_t>(L::stride), static_cast<index_t>(L::padding)};
}

/// Shape of a GlobalAvgPool on images of C channels and `pixels` pixels (channels-last: a sample
/// is the column-major C x pixels matrix).
struct GlobalPoolGeometry {
  index_t C, pixels;
  constexpr index_t in_size() const noexcept { return pixels * C; }

  /// Channel c's mean over one sample's image x, summed pixel by pixel.
  template <class T>
  FLOTILLA_HOST_DEVICE T channel_mean(index_t c, const T* x) const noexcept {
    T sum = 0;
    for (index_t p = 0; p < pixels; ++p) sum += x[p * C + c];
    return sum * (T(1) / T(pixels));
  }
  /// d(input) at offset i of a sample: its channel's output gradient, shared by every pixel.
  template <class T>
  FLOTILLA_HOST_DEVICE T backward_value(index_t i, const T* dy) const noexcept {
    return dy[i % C] * (T(1) / T(pixels));
  }
};

/// GlobalAvgPool layer type L (from nn/global_avg_pool.hpp) -> its geometry.
template <class L>
constexpr GlobalPoolGeometry global_pool_geometry() noexcept {
  return {static_cast<index_t>(L::C), static_cast<index_t>(L::pixels)};
}

/// Dropout's multiplier for feature j of the sample with id `id`: 0 (dropped) or keep_scale. The
/// CPU layer (nn/dropout.hpp) draws a sample's features in order from one splitmix64 stream seeded
/// with mix(key, id); splitmix64 is counter-based (draw j hashes seed + (j + 1) * gamma), so any
/// thread can compute draw j alone, and the masks agree with the CPU's bit for bit.
FLOTILLA_HOST_DEVICE constexpr float dropout_scale(std::uint64_t key, std::uint64_t id, std::uint64_t j, double rate,
                                                   float keep_scale) noexcept {
  std::uint64_t state = flotilla::detail::mix(key, id) + j * 0x9e3779b97f4a7c15ULL;
  const std::uint64_t bits = flotilla::detail::splitmix64(state);
  const double u = static_cast<double>(bits >> 11) * 0x1.0p-53;  // bits_to_unit<double>
  return u < rate ? 0.0f : keep_scale;
}

/// Network's key for layer `layer`'s randomness in a run of (seed, epoch), as nn/network.hpp forms it.
constexpr std::uint64_t layer_noise_key(std::uint64_t seed, std::uint64_t epoch, std::size_t layer) noexcept {
  return flotilla::detail::mix(flotilla::detail::mix(seed, epoch), layer + 1);
}

}  // namespace flotilla::cuda
#endif  // FLOTILLA_CUDA_INDEXMATH_HPP_INCLUDED
