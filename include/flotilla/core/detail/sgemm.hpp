// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_DETAIL_SGEMM_HPP_INCLUDED
#define FLOTILLA_CORE_DETAIL_SGEMM_HPP_INCLUDED
// flotilla's single-precision GEMM: C = op(A) op(B) [+ bias 1^T] [+ C], column-major, in the
// GotoBLAS/BLIS style. Double precision, and targets without AVX2+FMA, use Eigen instead.
//
//   for each nc-wide block of columns of C                    (B block: L3)
//     for each kc-deep slice of k:  pack B[kc x nc]
//       for each mc-tall block of rows:  pack A[mc x kc]      (A block: L2)
//         for each NR-wide sliver of B                        (B sliver: L1)
//           for each MR-tall sliver of A:  micro-kernel       (C tile: registers)
//
// Packing copies each operand block once into the order the micro-kernel reads it, so the kernel
// streams contiguous memory whatever the operands' strides and transpositions. The packing of A
// and of B is a parameter of the driver (sgemm_packed): a packer is any object that fills the
// packed layout, so a convolution can pack image patches straight from the image (implicit
// im2col, see nn/conv2d.hpp) instead of materialising the im2col matrix for GEMM to copy again.
//
// Thread safety: the driver keeps no shared state. Its packing buffers are per thread
// (thread_local) and are reused from call to call, growing when a larger product needs more:
// allocating a fresh multi-MiB buffer per call would return fresh pages from the OS each time, and
// the page faults on first touch cost more than a small product itself.
#include <algorithm>
#include <cstddef>
#include <type_traits>

#include <Eigen/Core>

#include "flotilla/core/detail/sgemm_kernel.hpp"
#include "flotilla/core/tensor.hpp"

namespace flotilla::detail {
inline namespace FLOTILLA_SGEMM_ISA {

/// Where a packed block of A lies: value (i, p) of the block (i counted from the block's first
/// row, p from its first k) is at data[(i / MR) * panel_stride + p * k_step + i % MR].
struct SgemmABlock {
  const float* data;
  sgemm_index panel_stride;
  sgemm_index k_step;
};

/// Packs op(A)(i, p) = a[i * rs + p * cs], for a column-major A (rs = 1, cs = lda) or the
/// transpose of one (rs = lda, cs = 1).
struct SgemmPackA {
  const float* a;
  sgemm_index rs, cs;

  /// Writes rows [i0, i0 + mc) x k [p0, p0 + kc) into `buf` (ceil(mc / MR) * MR * kc floats).
  SgemmABlock operator()(float* buf, sgemm_index i0, sgemm_index mc, sgemm_index p0, sgemm_index kc) const;
};

/// Packs a column-major B (op(B)(p, j) = b[p + j * ldb]): each column's k run is contiguous in
/// the source, so the n-major layout makes the packing a straight copy.
struct SgemmPackB {
  static constexpr BLayout layout = BLayout::n_major;
  const float* b;
  sgemm_index ldb;
  void operator()(float* buf, sgemm_index j0, sgemm_index nc, sgemm_index p0, sgemm_index kc) const;
};

/// Packs the transpose of a column-major matrix (op(B)(p, j) = b[j + p * ldb]): each k's run of
/// columns is contiguous in the source, so the k-major layout makes the packing a straight copy.
struct SgemmPackBt {
  static constexpr BLayout layout = BLayout::k_major;
  const float* b;
  sgemm_index ldb;
  void operator()(float* buf, sgemm_index j0, sgemm_index nc, sgemm_index p0, sgemm_index kc) const;
};

/// An A packed whole, once, and then used by several products (the same W^T against successive
/// column chunks of a gradient, say). Made by sgemm_prepack_a; pass it as the A packer.
struct SgemmPackedA {
  SgemmABlock whole;
  SgemmABlock operator()(float* /*buf*/, sgemm_index i0, sgemm_index /*mc*/, sgemm_index p0, sgemm_index /*kc*/) const {
    // The driver's row blocks start at multiples of MR, so i0 / MR is a whole panel.
    return {whole.data + i0 / sgemm_mr * whole.panel_stride + p0 * whole.k_step, whole.panel_stride, whole.k_step};
  }
};

/// Packs all of an m x k op(A) into `storage` (grown as needed) with `pack`.
template <class PackA>
inline SgemmPackedA sgemm_prepack_a(Buffer<float>& storage, sgemm_index m, sgemm_index k, const PackA& pack) {
  const sgemm_index size = (m + sgemm_mr - 1) / sgemm_mr * sgemm_mr * k;
  if (storage.size() < static_cast<std::size_t>(size)) storage.resize(static_cast<std::size_t>(size));
  return {pack(storage.data(), 0, m, 0, k)};
}

/// Floats in one packed B sliver of depth kc.
template <BLayout L>
constexpr sgemm_index sgemm_b_sliver(sgemm_index kc) {
  return L == BLayout::k_major ? sgemm_nr * kc : sgemm_nr * sgemm_kcs;
}

/// The block size for `total` items in blocks of at most `max`, evened out (k = 400 runs as two
/// blocks of 200 rather than 384 + 16, whose short block would pay the C loads and stores of a
/// whole pass for little work) and rounded up to a multiple of `multiple` (which divides `max`).
inline sgemm_index sgemm_block(sgemm_index total, sgemm_index max, sgemm_index multiple) {
  const sgemm_index blocks = (total + max - 1) / max;
  const sgemm_index even = (total + blocks - 1) / blocks;
  return (even + multiple - 1) / multiple * multiple;
}

/// The per-thread packing buffers (see the top of this file for why they persist).
struct SgemmWorkspace {
  Buffer<float> a, b;
  static float* at_least(Buffer<float>& buf, sgemm_index n) {
    if (buf.size() < static_cast<std::size_t>(n)) {
      Buffer<float>().swap(buf);  // drop the old contents rather than copy them into the new block
      buf.resize(static_cast<std::size_t>(n));
    }
    return buf.data();
  }
};
inline SgemmWorkspace& sgemm_workspace() {
  thread_local SgemmWorkspace ws;
  return ws;
}

/// C (m x n, column-major, leading dimension ldc) = op(A) op(B), plus bias[i] on every column i
/// when `bias` is given, plus the old C when `accumulate`; op(A) is m x k and op(B) is k x n as
/// the packers see them. C must not alias either operand. Only where sgemm_has_kernel: callers
/// with their own packers keep a plain path for other targets (as Conv2D does).
template <class PackA, class PackB>
inline void sgemm_packed(sgemm_index m, sgemm_index n, sgemm_index k, const PackA& pack_a, const PackB& pack_b, float* c,
                         sgemm_index ldc, bool accumulate, const float* bias = nullptr) {
  static_assert(sgemm_has_kernel || sizeof(PackA) == 0,
                "sgemm_packed needs a micro-kernel (AVX2+FMA or AVX-512): test detail::sgemm_has_kernel first");
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (sgemm_index j = 0; j < n; ++j)
      for (sgemm_index i = 0; i < m; ++i)
        c[i + j * ldc] = (accumulate ? c[i + j * ldc] : 0.0f) + (bias ? bias[i] : 0.0f);
    return;
  }
  if constexpr (sgemm_has_kernel) {
    constexpr BLayout L = PackB::layout;
    const sgemm_index kc_max = sgemm_block(k, sgemm_kc, 1);
    const sgemm_index mc_max = sgemm_block(m, sgemm_mc, sgemm_mr);
    // With a single block of rows (m <= mc, as for a layer's F x patch weights), a packed B
    // sliver serves only m / MR tiles, right after the packer wrote it: keep the whole B block
    // in L2 then (sgemm_l2_floats, less the A block), or its lines are written out to L3 and
    // fetched back. With several row blocks B is reused by all of them and a wide block sits in
    // L3, as in Goto's scheme (a narrower one would repack A more often).
    const sgemm_index nc_limit =
        m > mc_max ? sgemm_nc
                   : std::clamp<sgemm_index>((sgemm_l2_floats - mc_max * kc_max) / sgemm_b_sliver<L>(kc_max) * sgemm_nr,
                                             sgemm_nr, sgemm_nc);
    const sgemm_index nc_max = sgemm_block(n, nc_limit, sgemm_nr);
    SgemmWorkspace& ws = sgemm_workspace();
    float* const bbuf = SgemmWorkspace::at_least(ws.b, (nc_max + sgemm_nr - 1) / sgemm_nr * sgemm_b_sliver<L>(kc_max));
    float* const abuf = SgemmWorkspace::at_least(ws.a, mc_max * kc_max);
    for (sgemm_index jc = 0; jc < n; jc += nc_max) {
      const sgemm_index nc = std::min(nc_max, n - jc);
      for (sgemm_index pc = 0; pc < k; pc += kc_max) {
        const sgemm_index kc = std::min(kc_max, k - pc);
        pack_b(bbuf, jc, nc, pc, kc);
        const bool load_c = accumulate || pc > 0;
        const float* const bias_here = pc == 0 ? bias : nullptr;
        for (sgemm_index ic = 0; ic < m; ic += mc_max) {
          const sgemm_index mc = std::min(mc_max, m - ic);
          const SgemmABlock ab = pack_a(abuf, ic, mc, pc, kc);
          for (sgemm_index jr = 0; jr < nc; jr += sgemm_nr) {
            const int cols = static_cast<int>(std::min<sgemm_index>(sgemm_nr, nc - jr));
            const float* const bp = bbuf + jr / sgemm_nr * sgemm_b_sliver<L>(kc);
            float* const cj = c + (jc + jr) * ldc;
            for (sgemm_index ir = 0; ir < mc; ir += sgemm_mr) {
              const int rows = static_cast<int>(std::min<sgemm_index>(sgemm_mr, mc - ir));
              sgemm_kernel_for<L>(rows, cols)(kc, ab.data + ir / sgemm_mr * ab.panel_stride, ab.k_step, bp,
                                              cj + ic + ir, ldc, rows, load_c,
                                              bias_here ? bias_here + ic + ir : nullptr);
            }
          }
        }
      }
    }
  }
}

/// C = op(A) op(B) [+ bias 1^T] [+ C] on raw column-major storage, BLAS-style: op(A) is m x k
/// (A itself k x m when trans_a), op(B) is k x n (B itself n x k when trans_b).
///
/// A template on the scalar (which must be float) so that only the translation units that call it
/// instantiate its body: Eigen's product machinery, in the fallback, would otherwise cost compile
/// time in every unit that merely includes this header
/// (docs/benchmarks.md, "Compile time of the headers").
template <class Float>
inline void sgemm(bool trans_a, bool trans_b, sgemm_index m, sgemm_index n, sgemm_index k, const Float* a,
                  sgemm_index lda, const Float* b, sgemm_index ldb, Float* c, sgemm_index ldc, bool accumulate,
                  const std::type_identity_t<Float>* bias = nullptr) {
  static_assert(std::is_same_v<Float, float>, "sgemm is single precision: use Eigen's products for other types");
  if constexpr (sgemm_has_kernel) {
    const SgemmPackA pa{a, trans_a ? lda : 1, trans_a ? 1 : lda};
    if (trans_b) {
      sgemm_packed(m, n, k, pa, SgemmPackBt{b, ldb}, c, ldc, accumulate, bias);
    } else {
      sgemm_packed(m, n, k, pa, SgemmPackB{b, ldb}, c, ldc, accumulate, bias);
    }
  } else {
    using Matrix = Eigen::Matrix<Float, Eigen::Dynamic, Eigen::Dynamic>;
    using Map = Eigen::Map<const Matrix, 0, Eigen::OuterStride<>>;
    if (m <= 0 || n <= 0) return;
    Eigen::Map<Matrix, 0, Eigen::OuterStride<>> cm(c, m, n, Eigen::OuterStride<>(ldc));
    if (!accumulate) cm.setZero();
    if (bias) cm.colwise() += Eigen::Map<const Eigen::Matrix<Float, Eigen::Dynamic, 1>>(bias, m);
    if (k <= 0) return;
    const Map am(a, trans_a ? k : m, trans_a ? m : k, Eigen::OuterStride<>(lda));
    const Map bm(b, trans_b ? n : k, trans_b ? k : n, Eigen::OuterStride<>(ldb));
    if (trans_a && trans_b) {
      cm.noalias() += am.transpose() * bm.transpose();
    } else if (trans_a) {
      cm.noalias() += am.transpose() * bm;
    } else if (trans_b) {
      cm.noalias() += am * bm.transpose();
    } else {
      cm.noalias() += am * bm;
    }
  }
}

// ---- packers --------------------------------------------------------------------------------

inline SgemmABlock SgemmPackA::operator()(float* buf, sgemm_index i0, sgemm_index mc, sgemm_index p0,
                                          sgemm_index kc) const {
  // A column-major A whose rows fill whole slivers can be read in place: its k step is lda
  // rather than MR, which costs the kernel nothing, and the copy it saves is a pass over what
  // is often the larger operand (a weight matrix against a batch of 64). Only while lda is short
  // (sgemm_direct_lda): k steps 4 KiB apart would all fall into one L1 set, and a 1024 x 1024
  // product measured slower unpacked.
  if (rs == 1 && mc % sgemm_mr == 0 && cs <= sgemm_direct_lda) return {a + i0 + p0 * cs, sgemm_mr, cs};
  for (sgemm_index r = 0; r < mc; r += sgemm_mr) {
    const int rows = static_cast<int>(std::min<sgemm_index>(sgemm_mr, mc - r));
    float* dst = buf + r * kc;
    const float* src = a + (i0 + r) * rs + p0 * cs;
    if (rs == 1) {
      for (sgemm_index p = 0; p < kc; ++p) sgemm_copy_mr(dst + p * sgemm_mr, src + p * cs, rows);
    } else {
      // Transposed source (W^T in the input gradients): each row of the sliver is contiguous
      // along k, so the packing is a transposition, by 8 x 8 blocks and then singly at the edges.
      const int rows8 = rows / 8 * 8;
      const sgemm_index kc8 = kc / 8 * 8;
      for (int i = 0; i < rows8; i += 8)
        for (sgemm_index p = 0; p < kc8; p += 8) sgemm_transpose_8x8(src + i * rs + p, rs, dst + p * sgemm_mr + i, sgemm_mr);
      for (int i = 0; i < rows; ++i) {
        const float* s = src + i * rs;
        for (sgemm_index p = i < rows8 ? kc8 : 0; p < kc; ++p) dst[p * sgemm_mr + i] = s[p];
      }
      if (rows < sgemm_mr)
        for (sgemm_index p = 0; p < kc; ++p) std::fill(dst + p * sgemm_mr + rows, dst + (p + 1) * sgemm_mr, 0.0f);
    }
  }
  return {buf, sgemm_mr * kc, sgemm_mr};
}

inline void SgemmPackB::operator()(float* buf, sgemm_index j0, sgemm_index nc, sgemm_index p0, sgemm_index kc) const {
  for (sgemm_index j = 0; j < nc; ++j)
    sgemm_copy(buf + j / sgemm_nr * sgemm_b_sliver<layout>(kc) + j % sgemm_nr * sgemm_kcs, b + p0 + (j0 + j) * ldb, kc);
}

inline void SgemmPackBt::operator()(float* buf, sgemm_index j0, sgemm_index nc, sgemm_index p0, sgemm_index kc) const {
  for (sgemm_index jr = 0; jr < nc; jr += sgemm_nr) {
    const sgemm_index cols = std::min<sgemm_index>(sgemm_nr, nc - jr);
    float* dst = buf + jr / sgemm_nr * sgemm_b_sliver<layout>(kc);
    const float* src = b + j0 + jr + p0 * ldb;
    for (sgemm_index p = 0; p < kc; ++p) sgemm_copy(dst + p * sgemm_nr, src + p * ldb, cols);
  }
}

}  // namespace FLOTILLA_SGEMM_ISA
}  // namespace flotilla::detail
#endif  // FLOTILLA_CORE_DETAIL_SGEMM_HPP_INCLUDED
