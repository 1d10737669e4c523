// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_DETAIL_SGEMMSTRIDED_HPP_INCLUDED
#define FLOTILLA_CORE_DETAIL_SGEMMSTRIDED_HPP_INCLUDED
// A micro-kernel of flotilla's single-precision GEMM that reads its B operand in place, along
// strides, instead of from a packed sliver: the products of a convolution whose B would be an
// im2col matrix (nn/conv2d.hpp) read the image itself.
//
// Packing pays where B is reused: by many row blocks of a tall A, or by many k blocks. A
// convolution's products are short (F rows: 16 to 64) and the image values they read are already
// laid out along two strides (a patch's kernel row is K*C contiguous values; consecutive output
// pixels are Stride*C apart), so a packed copy would cost one more pass over every patch value
// for a single use. Measured on Conv2D<16, 3, 1, 1> on 28 x 28 images, batch 64: the packing took
// about 40% of the forward product's time and 50% of the weight gradient's.
//
// The kernel's k runs over a two-level range, `outer` x `inner`: a convolution's forward product
// runs over the K kernel rows of a patch (outer, one image row apart) and the K*C values of each
// (inner, contiguous); its weight gradient over the output rows of an image (outer) and the
// output pixels of a row (inner, Stride*C apart). The column stride is a template argument, so
// the N broadcasts of one k are N constant displacements from one pointer.
#include <cstddef>

#include "flotilla/core/detail/sgemm_kernel.hpp"

namespace flotilla::detail {
inline namespace FLOTILLA_SGEMM_ISA {

/// Where the B values of one k lie: b(o, i) + j * ColStride for column j, with
/// b(o, i) = b + o * outer_stride + i * inner_stride, for k = o * inner + i.
struct SgemmStridedB {
  const float* b;
  sgemm_index outer, outer_stride, inner, inner_stride;
};

#if !defined(FLOTILLA_NO_SGEMM_KERNEL) && (defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__)))

/// Vector registers of the target: the strided tiles are sized to fill them.
inline constexpr int sgemm_vector_registers = sgemm_impl::Simd::width == 16 ? 32 : 16;
/// Rows of C in one vector.
inline constexpr int sgemm_lanes = sgemm_impl::Simd::width;

/// The widest strided tile with `vectors` vectors of rows: vectors * N accumulators, `vectors`
/// registers for A (and as many for the row sums) and one for a broadcast.
constexpr int sgemm_strided_max_columns(int vectors, bool row_sums = false) {
  const int columns = (sgemm_vector_registers - vectors * (row_sums ? 2 : 1) - 1) / vectors;
  return columns < 24 ? columns : 24;
}

/// One tile C[0 : MV * lanes, 0 : N] (+)= A B over the k range of `src`, where A's k-th column
/// is MV whole vectors at a + k * a_step (no partial rows: the caller's row count is a multiple of
/// the lanes), plus bias on every column when given, plus the old C when load_c. With RowSums,
/// also row_sums[0 : MV * lanes] += the sum of A's columns (a bias gradient, from the pass that
/// makes the weight gradient).
///
/// Never inlined: inside a caller's loops GCC stops inlining the unrolled lambdas and keeps the
/// accumulators in memory (a third of the speed, measured); on its own, as the packed kernels
/// (which are called through pointers), the tile lives in registers.
template <int MV, int N, sgemm_index ColStride, bool RowSums = false>
[[gnu::noinline]] inline void sgemm_strided_ukernel(const float* a, sgemm_index a_step, const SgemmStridedB& src, float* c,
                                  sgemm_index ldc, bool load_c, const float* bias, float* row_sums = nullptr) {
  static_assert(N >= 1 && N <= sgemm_strided_max_columns(MV, RowSums), "sgemm_strided_ukernel: tile wider than the registers");
  using V = sgemm_impl::Simd;
  using reg = typename V::reg;
  constexpr int W = V::width;
  reg acc[MV][N];
  reg sums[MV];
  sgemm_impl::unroll<MV>([&](auto v) {
    const reg init = bias ? V::load(bias + v * W) : V::zero();
    sgemm_impl::unroll<N>([&](auto j) { acc[v][j] = init; });
    sums[v] = V::zero();
  });
  // One loop over k, the outer step taken when an inner run ends: with two nested loops GCC
  // keeps the accumulator array on the stack and stores it every step.
  const sgemm_index inner = src.inner, inner_stride = src.inner_stride, outer_stride = src.outer_stride;
  const float* row = src.b;
  const float* bp = row;
  sgemm_index left = inner;
  for (sgemm_index k = src.outer * inner; k > 0; --k) {
    reg av[MV];
    sgemm_impl::unroll<MV>([&](auto v) { av[v] = V::load(a + v * W); });
    sgemm_impl::unroll<N>([&](auto j) {
      const reg bj = V::broadcast(bp + j * ColStride);
      sgemm_impl::unroll<MV>([&](auto v) { acc[v][j] = V::fma(av[v], bj, acc[v][j]); });
    });
    if constexpr (RowSums) sgemm_impl::unroll<MV>([&](auto v) { sums[v] = V::add(sums[v], av[v]); });
    a += a_step;
    bp += inner_stride;
    if (--left == 0) {
      row += outer_stride;
      bp = row;
      left = inner;
    }
  }
  sgemm_impl::unroll<N>([&](auto j) {
    float* cj = c + j * ldc;
    sgemm_impl::unroll<MV>([&](auto v) { V::store(cj + v * W, load_c ? V::add(acc[v][j], V::load(cj + v * W)) : acc[v][j]); });
  });
  if constexpr (RowSums) sgemm_impl::unroll<MV>([&](auto v) { V::store(row_sums + v * W, V::add(sums[v], V::load(row_sums + v * W))); });
}

#else

// Without a kernel (sgemm_has_kernel is false) callers keep their packed or plain paths; the
// declaration lets their code for the strided path compile unused.
inline constexpr int sgemm_vector_registers = 0;
inline constexpr int sgemm_lanes = 1;
constexpr int sgemm_strided_max_columns(int, bool = false) { return 0; }
template <int MV, int N, sgemm_index ColStride, bool RowSums = false>
inline void sgemm_strided_ukernel(const float*, sgemm_index, const SgemmStridedB&, float*, sgemm_index, bool, const float*,
                                  float* = nullptr) {
  static_assert(MV < 0, "sgemm_strided_ukernel needs a micro-kernel: test detail::sgemm_has_kernel first");
}

#endif

/// The tiles of strided products with `Rows` outputs a pixel (in blocks of one or two vectors,
/// whichever divides Rows) along rows of `Width` pixels: as few tiles a row as the registers
/// allow, as even as can be (28 pixels: two tiles of 14, not 24 + 4).
template <std::size_t Rows, std::size_t Width>
struct SgemmRowTiles {
  static constexpr std::size_t rows = Rows, width = Width;
  static constexpr int vectors = Rows % (2 * static_cast<std::size_t>(sgemm_lanes)) == 0 ? 2 : 1;
  static constexpr std::size_t block_rows = static_cast<std::size_t>(vectors * sgemm_lanes);
  static constexpr int max_columns = sgemm_strided_max_columns(vectors);
  /// Whether there is a kernel and Rows is whole vectors: the kernel has no partial rows.
  static constexpr bool fit = max_columns > 0 && Rows % static_cast<std::size_t>(sgemm_lanes) == 0;
  static constexpr std::size_t tiles = fit ? (Width + static_cast<std::size_t>(max_columns) - 1) / static_cast<std::size_t>(max_columns) : 1;
  static constexpr int columns = static_cast<int>((Width + tiles - 1) / tiles);
  static constexpr int last_columns = static_cast<int>(Width - (tiles - 1) * static_cast<std::size_t>(columns));

  /// One row: out(pixel x, rows) = A B(:, x) (+ bias) for x < Width, where A's k-th column is
  /// at a + k * Rows, B's columns of a tile starting at pixel x0 are where b_at(x0) says (ColStride
  /// apart), and out holds Rows values a pixel.
  template <sgemm_index ColStride, class BAt>
  static void row(const float* a, const BAt& b_at, float* out, const float* bias) {
    constexpr auto ld = static_cast<sgemm_index>(Rows);
    for (std::size_t t = 0; t < tiles; ++t) {
      const std::size_t x0 = t * static_cast<std::size_t>(columns);
      const SgemmStridedB src = b_at(x0);
      for (std::size_t r = 0; r < Rows; r += block_rows) {
        float* const o = out + x0 * Rows + r;
        const float* const br = bias ? bias + r : nullptr;
        if (t + 1 < tiles) {
          sgemm_strided_ukernel<vectors, columns, ColStride>(a + r, ld, src, o, ld, false, br);
        } else {
          sgemm_strided_ukernel<vectors, last_columns, ColStride>(a + r, ld, src, o, ld, false, br);
        }
      }
    }
  }
};

}  // namespace FLOTILLA_SGEMM_ISA
}  // namespace flotilla::detail
#endif  // FLOTILLA_CORE_DETAIL_SGEMMSTRIDED_HPP_INCLUDED
