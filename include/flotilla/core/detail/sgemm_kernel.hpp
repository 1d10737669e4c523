// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_DETAIL_SGEMMKERNEL_HPP_INCLUDED
#define FLOTILLA_CORE_DETAIL_SGEMMKERNEL_HPP_INCLUDED
// The register-blocked micro-kernels behind flotilla's single-precision GEMM (core/detail/sgemm.hpp), and
// the block sizes that go with them.
//
// A micro-kernel computes one MR x NR tile of C from a packed sliver of A (MR rows, kc columns)
// and a packed sliver of B (kc rows, NR columns), holding the whole tile in vector registers for
// the length of the k loop: per k it loads MR/width vectors of A, broadcasts NR scalars of B and
// issues (MR/width) * NR fused multiply-adds, so it runs at the FMA units' rate rather than at the
// memory's.
//
// Which kernel is compiled depends on the target flags of the translation unit:
//   __AVX512F__           16 lanes, MR = 32 (2 vectors), NR = 12: 24 zmm accumulators
//   __AVX2__ && __FMA__    8 lanes, MR = 16 (2 vectors), NR = 6:  12 ymm accumulators
//   otherwise             none: sgemm() falls back to Eigen (sgemm_has_kernel is false)
// Defining FLOTILLA_NO_SGEMM_KERNEL forces the fallback. Everything here lives in an inline
// namespace named after the instruction set, so translation units built with different flags
// get distinct symbols instead of silently sharing one (ODR-violating) definition of a kernel
// whose tile shape differs from their packing code's.
#include <cstddef>
#include <string_view>
#include <type_traits>
#include <utility>

#if !defined(FLOTILLA_NO_SGEMM_KERNEL) && defined(__AVX512F__)
#define FLOTILLA_SGEMM_ISA sgemm_avx512
#elif !defined(FLOTILLA_NO_SGEMM_KERNEL) && defined(__AVX2__) && defined(__FMA__)
#define FLOTILLA_SGEMM_ISA sgemm_avx2
#else
#define FLOTILLA_SGEMM_ISA sgemm_none
#endif

#if !defined(FLOTILLA_NO_SGEMM_KERNEL) && (defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__)))
#include <immintrin.h>
#endif

namespace flotilla::detail {
inline namespace FLOTILLA_SGEMM_ISA {

using sgemm_index = std::ptrdiff_t;

/// How a packed B sliver is laid out. The kernel only ever broadcasts single values of B, so it
/// can read either order at the same speed; the packing code picks whichever order makes its own
/// copy contiguous (see sgemm.hpp), which saves a transposition on every B element.
enum class BLayout {
  k_major,  ///< value (p, j) at b[p * NR + j]: the NR values of one k are adjacent
  n_major,  ///< value (p, j) at b[j * sgemm_kcs + p]: one column's kc values are adjacent
};

namespace sgemm_impl {
/// Calls f(integral_constant<int, 0>) ... f(integral_constant<int, N-1>): a loop that is unrolled
/// whatever the compiler's heuristics, so that the accumulator array is only ever indexed by
/// constants and lives entirely in registers.
template <class F, int... I>
[[gnu::always_inline]] inline void unroll_impl(F& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, class F>
[[gnu::always_inline]] inline void unroll(F&& f) {
  unroll_impl(f, std::make_integer_sequence<int, N>{});
}
}  // namespace sgemm_impl

#if !defined(FLOTILLA_NO_SGEMM_KERNEL) && defined(__AVX512F__)

inline constexpr bool sgemm_has_kernel = true;
inline constexpr std::string_view sgemm_kernel_name = "AVX-512";

namespace sgemm_impl {
struct Simd {
  using reg = __m512;
  static constexpr int width = 16;
  static __mmask16 mask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static reg zero() { return _mm512_setzero_ps(); }
  static reg load(const float* p) { return _mm512_loadu_ps(p); }
  static reg load(const float* p, int n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  static void store(float* p, reg v) { _mm512_storeu_ps(p, v); }
  static void store(float* p, reg v, int n) { _mm512_mask_storeu_ps(p, mask(n), v); }
  static reg broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static reg fma(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
};
}  // namespace sgemm_impl

// Zen 4 (the tuning target) issues one 512-bit FMA per cycle with a latency of 4, so any tile
// with >= 8 accumulators keeps it busy; 32 x 12 (24 accumulators, 2 A vectors, B broadcast
// straight from memory) leaves registers spare and loads only 14 values per 24 FMAs.
inline constexpr int sgemm_mr = 32;
inline constexpr int sgemm_nr = 12;

#elif !defined(FLOTILLA_NO_SGEMM_KERNEL) && defined(__AVX2__) && defined(__FMA__)

inline constexpr bool sgemm_has_kernel = true;
inline constexpr std::string_view sgemm_kernel_name = "AVX2+FMA";

namespace sgemm_impl {
struct Simd {
  using reg = __m256;
  static constexpr int width = 8;
  static __m256i mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static reg zero() { return _mm256_setzero_ps(); }
  static reg load(const float* p) { return _mm256_loadu_ps(p); }
  static reg load(const float* p, int n) { return _mm256_maskload_ps(p, mask(n)); }
  static void store(float* p, reg v) { _mm256_storeu_ps(p, v); }
  static void store(float* p, reg v, int n) { _mm256_maskstore_ps(p, mask(n), v); }
  static reg broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
};
}  // namespace sgemm_impl

// 16 ymm registers: 2 x 6 accumulators, 2 for A, 1 for the broadcast (the classic 16 x 6 tile).
inline constexpr int sgemm_mr = 16;
inline constexpr int sgemm_nr = 6;

#else

/// No micro-kernel for this target: sgemm() forwards to Eigen and callers keep their plain paths.
inline constexpr bool sgemm_has_kernel = false;
inline constexpr std::string_view sgemm_kernel_name = "none (Eigen's product)";
inline constexpr int sgemm_mr = 8;
inline constexpr int sgemm_nr = 4;

#endif

// Cache blocking (Goto/BLIS): a kc x NR sliver of B stays in L1 (12 x 384 floats = 18 KiB of the
// 32 KiB) while the mc x kc block of A streams from L2 (at most 384 x 384 floats = 576 KiB of the
// 1 MiB), and the kc x nc block of B sits in L3. Chosen on Zen 4 with bench/gemm/sgemm_bench.cpp
// and the layer timings: kc from 256 to 512 and nc from 768 to 6144 measured within noise of one
// another there (flotilla's k are short: 25 to 800), so these are the middle of a flat range and
// should suit any core with >= 32 KiB L1 and >= 512 KiB L2.
inline constexpr sgemm_index sgemm_kc = 384;
inline constexpr sgemm_index sgemm_mc = 384;
inline constexpr sgemm_index sgemm_nc = 3072;
/// Half of Zen 4's 1 MiB L2: the most the A and B blocks may fill when B is to stay in L2
/// (see sgemm_packed). Worth about 3% on Conv2D<64, 5>'s weight gradient.
inline constexpr sgemm_index sgemm_l2_floats = static_cast<sgemm_index>((512 << 10) / sizeof(float));
/// The longest leading dimension of a column-major A that the kernel reads in place, unpacked
/// (see SgemmPackA): 1 KiB between consecutive k.
inline constexpr sgemm_index sgemm_direct_lda = 256;
/// Distance between columns of an n-major B sliver: one cache line more than kc, so that the NR
/// column streams the kernel reads are never a multiple of 1 KiB apart (which would crowd them
/// into a few L1 sets) whatever kc is tuned to.
inline constexpr sgemm_index sgemm_kcs = sgemm_kc + 16;

using sgemm_ukernel_fn = void (*)(sgemm_index, const float*, sgemm_index, const float*, float*, sgemm_index, int, bool,
                                  const float*);

#if !defined(FLOTILLA_NO_SGEMM_KERNEL) && (defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__)))

/// One tile: C[0:rows, 0:N] (+)= A_sliver * B_sliver, optionally + bias[0:rows] on every column.
/// `a` holds kc groups of MR values, `a_step` apart (MR when packed); `b` is laid out per L. Rows
/// past `rows` are computed from whatever A holds there (the packer zeroes them) but never stored;
/// columns past N are not computed at all, so narrow edges of C cost no wasted multiplies.
template <int MV, int N, BLayout L>
inline void sgemm_ukernel(sgemm_index kc, const float* a, sgemm_index a_step, const float* b, float* c, sgemm_index ldc,
                          int rows, bool load_c, const float* bias) {
  using V = sgemm_impl::Simd;
  using reg = typename V::reg;
  constexpr int W = V::width;
  const int last = rows - (MV - 1) * W;  // valid lanes of the last vector, 1..W
  reg acc[MV][N];
  if (bias) {
    reg bv[MV];
    sgemm_impl::unroll<MV>([&](auto v) { bv[v] = v + 1 < MV || last == W ? V::load(bias + v * W) : V::load(bias + v * W, last); });
    sgemm_impl::unroll<N>([&](auto j) { sgemm_impl::unroll<MV>([&](auto v) { acc[v][j] = bv[v]; }); });
  } else {
    sgemm_impl::unroll<N>([&](auto j) { sgemm_impl::unroll<MV>([&](auto v) { acc[v][j] = V::zero(); }); });
  }
#pragma GCC unroll 4
  for (sgemm_index p = 0; p < kc; ++p) {
    reg av[MV];
    sgemm_impl::unroll<MV>([&](auto v) { av[v] = V::load(a + v * W); });
    sgemm_impl::unroll<N>([&](auto j) {
      const reg bj = V::broadcast(L == BLayout::k_major ? b + p * sgemm_nr + j : b + j * sgemm_kcs + p);
      sgemm_impl::unroll<MV>([&](auto v) { acc[v][j] = V::fma(av[v], bj, acc[v][j]); });
    });
    a += a_step;
  }
  if (last == W) {
    sgemm_impl::unroll<N>([&](auto j) {
      float* cj = c + j * ldc;
      sgemm_impl::unroll<MV>([&](auto v) {
        V::store(cj + v * W, load_c ? V::add(acc[v][j], V::load(cj + v * W)) : acc[v][j]);
      });
    });
  } else {
    sgemm_impl::unroll<N>([&](auto j) {
      float* cj = c + j * ldc;
      sgemm_impl::unroll<MV>([&](auto v) {
        if constexpr (decltype(v)::value + 1 < MV) {
          V::store(cj + v * W, load_c ? V::add(acc[v][j], V::load(cj + v * W)) : acc[v][j]);
        } else {
          V::store(cj + v * W, load_c ? V::add(acc[v][j], V::load(cj + v * W, last)) : acc[v][j], last);
        }
      });
    });
  }
}

namespace sgemm_impl {
template <BLayout L, int... J>
constexpr auto kernel_table(std::integer_sequence<int, J...>) {
  // [vectors - 1][columns - 1]: tiles of <= width rows use the one-vector kernel (half the work).
  struct Table {
    sgemm_ukernel_fn f[2][sizeof...(J)];
  };
  return Table{{{&sgemm_ukernel<1, J + 1, L>...}, {&sgemm_ukernel<2, J + 1, L>...}}};
}
template <BLayout L>
inline constexpr auto kernels = kernel_table<L>(std::make_integer_sequence<int, sgemm_nr>{});
}  // namespace sgemm_impl

/// The kernel for a tile of `rows` x `cols` (1 <= rows <= MR, 1 <= cols <= NR).
template <BLayout L>
inline sgemm_ukernel_fn sgemm_kernel_for(int rows, int cols) {
  return sgemm_impl::kernels<L>.f[rows > sgemm_impl::Simd::width ? 1 : 0][cols - 1];
}

/// Copies n floats (either pointer unaligned), with vector loads and one masked tail: the packing
/// routines copy many short runs (a kernel row of an image patch may be 5 floats), where a call to
/// memcpy would cost more than the copy.
inline void sgemm_copy(float* dst, const float* src, sgemm_index n) {
  using V = sgemm_impl::Simd;
  sgemm_index i = 0;
  for (; i + V::width <= n; i += V::width) V::store(dst + i, V::load(src + i));
  if (i < n) V::store(dst + i, V::load(src + i, static_cast<int>(n - i)), static_cast<int>(n - i));
}

/// Copies exactly N floats (N known at compile time, e.g. one k of a k-major B sliver) with
/// unmasked loads and stores of decreasing width: cheaper than a masked copy, whose store of a
/// partial vector costs more than two smaller full ones.
template <int N>
inline void sgemm_copy_n(float* dst, const float* src) {
  using V = sgemm_impl::Simd;
  constexpr int full = N / V::width * V::width;
  sgemm_impl::unroll<N / V::width>([&](auto v) { V::store(dst + v * V::width, V::load(src + v * V::width)); });
  constexpr int rest = N - full;
  if constexpr (rest >= 8) _mm256_storeu_ps(dst + full, _mm256_loadu_ps(src + full));
  constexpr int at4 = full + (rest >= 8 ? 8 : 0);
  if constexpr (N - at4 >= 4) _mm_storeu_ps(dst + at4, _mm_loadu_ps(src + at4));
  constexpr int at1 = at4 + (N - at4 >= 4 ? 4 : 0);
  for (int i = at1; i < N; ++i) dst[i] = src[i];
}

/// dst[t * dst_ld + i] = src[i * src_ld + t] for an 8 x 8 block: the transposition in the packing
/// of a transposed A (8 rows of A^T become 8 k steps of a sliver), in 24 shuffles rather than 64
/// scalar stores.
inline void sgemm_transpose_8x8(const float* src, sgemm_index src_ld, float* dst, sgemm_index dst_ld) {
  __m256 r[8], t[8];
  sgemm_impl::unroll<8>([&](auto i) { r[i] = _mm256_loadu_ps(src + i * src_ld); });
  sgemm_impl::unroll<4>([&](auto i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  });
  sgemm_impl::unroll<2>([&](auto h) {  // rows 0-3, then 4-7
    r[4 * h + 0] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
    r[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
    r[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
    r[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
  });
  sgemm_impl::unroll<4>([&](auto i) {
    _mm256_storeu_ps(dst + i * dst_ld, _mm256_permute2f128_ps(r[i], r[4 + i], 0x20));
    _mm256_storeu_ps(dst + (4 + i) * dst_ld, _mm256_permute2f128_ps(r[i], r[4 + i], 0x31));
  });
}

/// Copies `rows` (<= MR) floats and zeroes the rest of an MR-float group: one k of a packed A
/// sliver. The kernel computes all MR rows, so the padding must hold finite values.
inline void sgemm_copy_mr(float* dst, const float* src, int rows) {
  using V = sgemm_impl::Simd;
  sgemm_impl::unroll<sgemm_mr / V::width>([&](auto v) {
    const int n = rows - static_cast<int>(v) * V::width;
    V::store(dst + v * V::width, n >= V::width ? V::load(src + v * V::width) : n > 0 ? V::load(src + v * V::width, n) : V::zero());
  });
}

/// dst[0:n] += src[0:n].
inline void sgemm_add(float* dst, const float* src, sgemm_index n) {
  using V = sgemm_impl::Simd;
  sgemm_index i = 0;
  for (; i + V::width <= n; i += V::width) V::store(dst + i, V::add(V::load(dst + i), V::load(src + i)));
  if (i < n) {
    const int r = static_cast<int>(n - i);
    V::store(dst + i, V::add(V::load(dst + i, r), V::load(src + i, r)), r);
  }
}

#else

// Scalar stand-ins without a kernel: the packers then compile unchanged (sgemm_packed never
// runs them), and Conv2D's plain path uses sgemm_add in col2im.
template <BLayout L>
inline sgemm_ukernel_fn sgemm_kernel_for(int, int) {
  return nullptr;
}
inline void sgemm_copy(float* dst, const float* src, sgemm_index n) {
  for (sgemm_index i = 0; i < n; ++i) dst[i] = src[i];
}
inline void sgemm_copy_mr(float* dst, const float* src, int rows) {
  for (int i = 0; i < sgemm_mr; ++i) dst[i] = i < rows ? src[i] : 0.0f;
}
template <int N>
inline void sgemm_copy_n(float* dst, const float* src) {
  for (int i = 0; i < N; ++i) dst[i] = src[i];
}
inline void sgemm_transpose_8x8(const float* src, sgemm_index src_ld, float* dst, sgemm_index dst_ld) {
  for (sgemm_index i = 0; i < 8; ++i)
    for (sgemm_index t = 0; t < 8; ++t) dst[t * dst_ld + i] = src[i * src_ld + t];
}
inline void sgemm_add(float* dst, const float* src, sgemm_index n) {
  for (sgemm_index i = 0; i < n; ++i) dst[i] += src[i];
}

#endif

}  // namespace FLOTILLA_SGEMM_ISA
}  // namespace flotilla::detail
#endif  // FLOTILLA_CORE_DETAIL_SGEMMKERNEL_HPP_INCLUDED
