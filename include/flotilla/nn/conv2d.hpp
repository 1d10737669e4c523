// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_NN_CONV2D_HPP_INCLUDED
#define FLOTILLA_NN_CONV2D_HPP_INCLUDED
// Conv2D<F, K, Stride, Padding>: 2-D convolution of an image Shape<C, H, W> with F filters of K x K,
// by im2col and one matrix product per chunk of images. Padding `same` pads (K - 1) / 2 on every
// side, so that the output is H x W at stride 1 (ceil(H / Stride) x ceil(W / Stride) otherwise).
//
// Images are channels-last in memory, so one row of a K x K patch is K*C contiguous input values:
// im2col is a sequence of contiguous copies, and the product W (F x K*K*C) * cols (K*K*C x pixels)
// writes the output channels-last too, with no transposition anywhere.
//
// In float, where flotilla has its own GEMM kernel (core/detail/sgemm.hpp), the cols matrix is never
// built: the GEMM's B packers copy patch values straight from the image into the packed slivers
// (implicit im2col), both for the forward product and for the weight gradient dW = dY cols^T.
// Building cols first and having GEMM pack it again would move every value twice more through
// memory (cols is about K*K times the size of the image). The bias is added inside the forward
// product, and db comes out of the dW product as one more column (a column of ones in B), so
// neither costs a pass of its own over y or dY. The input gradient forms dcols = W^T dY, one
// image at a time, so that it is still in L2 when col2im folds it into dx.
//
// Where the filters fill whole vectors and the image has several channels, the products do not
// pack at all (core/detail/sgemm_strided.hpp): the micro-kernel reads patch values from the image
// in place, along the two strides they already have (a kernel row's K*C values are contiguous,
// consecutive output pixels are Stride*C apart). Packing pays where a packed value is reused, and
// a convolution's products are short (16 to 64 rows): packing cost up to half of their time. At
// stride 1 with 'same'-like padding, dX is then a convolution too (dY padded by K - 1 - P,
// filters flipped, filters and channels swapped), read in place the same way; elsewhere the full
// correlation would multiply H*W/(OH*OW) times as often (2.25 for 5 x 5 filters on 12 x 12 images
// without padding), and dcols + col2im stays.
// Double (used by the gradient checks) takes the plain im2col + gemm path.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "flotilla/concepts/initializer.hpp"
#include "flotilla/core/gemm.hpp"
#include "flotilla/core/detail/sgemm.hpp"
#include "flotilla/core/detail/sgemm_strided.hpp"
#include "flotilla/core/shape.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/nn/init.hpp"
#include "flotilla/core/layer_args.hpp"

namespace flotilla {

/// Conv2D's Padding for an output as large as the input at stride 1: `Conv2D<16, 3, 1, same>`.
/// Resolved to (K - 1) / 2 for an odd K (an even one would need more padding on one side than on
/// the other).
inline constexpr std::size_t same = static_cast<std::size_t>(-1);

template <std::size_t Filters, std::size_t Kernel, std::size_t Stride = 1, std::size_t Padding = 0,
          class Init = init::He>
struct Conv2D {
  static_assert(Filters > 0, "Conv2D<F, K>: the number of filters F must be > 0");
  static_assert(Kernel > 0, "Conv2D<F, K>: the kernel size K must be > 0");
  static_assert(Stride > 0, "Conv2D<F, K, Stride>: the stride must be > 0");
  static_assert(Padding != same || Kernel % 2 == 1,
                "Conv2D<F, K, Stride, same>: 'same' padding needs an odd kernel size K (it pads (K - 1) / 2 on each "
                "side); give the padding as a number for an even K");

  template <class In, class T>
  struct layer {
    /// The padding on each side, `same` resolved.
    static constexpr std::size_t padding = Padding == same ? (Kernel - 1) / 2 : Padding;
    static_assert(AnyShape<In>, "Conv2D: input_shape must be a flotilla::Shape");
    static_assert(ImageShape<In>,
                  "Conv2D: its input is a vector (Shape<N>); Conv2D needs an image Shape<C, H, W> "
                  "(declare Input<C, H, W>, and do not Flatten before it)");
    static constexpr std::size_t C = In::dims[0], H = In::dims[1], W = In::dims[2];
    static_assert(Kernel <= H + 2 * padding && Kernel <= W + 2 * padding,
                  "Conv2D<F, K>: the kernel is larger than the (padded) input image");
    static_assert(padding < Kernel, "Conv2D<F, K, S, P>: padding must be smaller than the kernel");
    static_assert(Initializer<Init, T>, "Conv2D: Init must be an initialiser (see nn/init.hpp)");

    static constexpr std::size_t OH = (H + 2 * padding - Kernel) / Stride + 1;
    static constexpr std::size_t OW = (W + 2 * padding - Kernel) / Stride + 1;
    static constexpr std::size_t patch = Kernel * Kernel * C;
    static constexpr std::size_t pixels = OH * OW;

    using spec = Conv2D;  // the spec this layer was bound from (device backends dispatch on it)
    static constexpr std::size_t kernel = Kernel, stride = Stride;
    using scalar_type = T;
    using input_shape = In;
    using output_shape = Shape<Filters, OH, OW>;
    static constexpr std::string_view name = "Conv2D";
    static constexpr std::array<TensorSpec, 2> tensors{{
        {"weight", Filters * patch, TensorRole::weight},
        {"bias", Filters, TensorRole::bias},
    }};
    static constexpr std::size_t parameter_count = Filters * patch + Filters;

    void initialize(std::span<T> params, Generator& g) const {
      Init::fill(params.first(Filters * patch), patch, Filters * Kernel * Kernel, g);
      for (auto& b : params.subspan(Filters * patch)) b = T(0);
    }

    void forward(const ForwardArgs<T>& a) {
      if constexpr (strided) {
        forward_strided(a);
      } else if constexpr (implicit_im2col) {
        forward_implicit(a);
      } else {
        const auto batch = static_cast<std::size_t>(a.input.cols());
        cols_.resize(patch * pixels * batch);
        for (std::size_t s = 0; s < batch; ++s) im2col(a.input.col(static_cast<Eigen::Index>(s)).data(), cols_.data() + s * patch * pixels);
        const auto cols = ConstMatrixView<T>(cols_.data(), patch, static_cast<Eigen::Index>(pixels * batch));
        auto y = MatrixView<T>(a.output.data(), Filters, static_cast<Eigen::Index>(pixels * batch));
        detail::gemm_bias(y, weight(a.params), cols, ConstVectorView<T>(a.params.data() + Filters * patch, Filters));
      }
    }

    void backward(const BackwardArgs<T>& a) {
      if constexpr (strided) {
        backward_strided(a);
      } else if constexpr (implicit_im2col) {
        backward_implicit(a);
      } else {
        const auto batch = static_cast<std::size_t>(a.input.cols());
        const auto n = static_cast<Eigen::Index>(pixels * batch);
        const auto dy = ConstMatrixView<T>(a.output_grad.data(), Filters, n);
        const auto cols = ConstMatrixView<T>(cols_.data(), patch, n);
        auto dw = MatrixView<T>(a.param_grads.data(), Filters, patch);
        detail::gemm(dw, dy, cols.transpose(), /*accumulate=*/true);
        detail::add_row_sums(dy.data(), static_cast<Eigen::Index>(Filters), n, a.param_grads.data() + Filters * patch);
        if (!a.wants_input_grad()) return;
        dcols_.resize(patch * pixels * batch);
        auto dcols = MatrixView<T>(dcols_.data(), patch, n);
        detail::gemm(dcols, weight(a.params).transpose(), dy, /*accumulate=*/false);
        for (std::size_t s = 0; s < batch; ++s)
          col2im(dcols_.data() + s * patch * pixels, a.input_grad.col(static_cast<Eigen::Index>(s)).data());
      }
    }

   private:
    static ConstMatrixView<T> weight(std::span<const T> p) { return ConstMatrixView<T>(p.data(), Filters, patch); }

    // ---- implicit im2col (float with an sgemm kernel) ----------------------------------------
    static constexpr bool implicit_im2col = std::is_same_v<T, float> && detail::sgemm_has_kernel;
    using index = detail::sgemm_index;
    // The patches are read from a zero-padded copy of the image when padding > 0, so that the
    // packers never test bounds: HP x WP x C per image.
    static constexpr std::size_t HP = H + 2 * padding, WP = W + 2 * padding;
    static constexpr std::size_t image_size = HP * WP * C;
    static constexpr std::size_t row_len = Kernel * C;  // one kernel row of a patch, contiguous in the image

    /// Whether a packed sliver holds runs of a patch's kernel row (K*C values contiguous in the
    /// image), or runs of a row of output pixels: with one channel and stride 1, the values that
    /// consecutive output pixels take at the same patch position are contiguous too, and an
    /// output row (OW) is longer than a kernel row (a first layer on grey images: 24 against 5).
    /// The layout of each packer follows, so that its copies are as long as possible.
    static constexpr bool pixel_runs = C == 1 && Stride == 1 && OW > row_len;
    static constexpr auto n_pixels = static_cast<index>(pixels), out_w = static_cast<index>(OW);
    static constexpr auto kernel_row = static_cast<index>(row_len), image_stride = static_cast<index>(image_size);

    /// Offset, in its (padded) image, of the first value of output pixel q's patch.
    static index patch_base(index q) {
      const index oy = q / out_w, ox = q % out_w;
      return (oy * static_cast<index>(Stride * WP) + ox * static_cast<index>(Stride)) * static_cast<index>(C);
    }
    /// Offset of patch value p = (ky, kx, c) from its patch's first value.
    static index patch_offset(index p) { return p / kernel_row * static_cast<index>(WP * C) + p % kernel_row; }

    /// Consecutive output pixels [at, at + len) of a range, all in one output row of one image,
    /// whose patches start at `offset` in the images.
    struct PixelRun {
      index at, offset, len;
    };
    /// Splits the batch-wide output pixels [g0, g0 + count) into runs; returns how many.
    static int split_pixels(index g0, index count, PixelRun* runs) {
      int r = 0;
      for (index at = 0; at < count; ++r) {
        const index g = g0 + at, q = g % n_pixels;
        const index len = std::min(out_w - q % out_w, count - at);
        runs[r] = {at, g / n_pixels * image_stride + patch_base(q), len};
        at += len;
      }
      return r;
    }

    /// B = cols (k: patch value, n: output pixel) of the forward product.
    struct PatchColumns {
      static constexpr detail::BLayout layout = pixel_runs ? detail::BLayout::k_major : detail::BLayout::n_major;
      const float* images;
      void operator()(float* buf, index j0, index nc, index p0, index kc) const {
        if constexpr (pixel_runs) {
          // Per patch value, the sliver's NR pixels: one run of an output row, or a few.
          index offset[detail::sgemm_kc];
          for (index p = 0; p < kc; ++p) offset[p] = patch_offset(p0 + p);
          for (index jr = 0; jr < nc; jr += detail::sgemm_nr) {
            PixelRun runs[detail::sgemm_nr];
            const int count = split_pixels(j0 + jr, std::min<index>(detail::sgemm_nr, nc - jr), runs);
            float* dst = buf + jr / detail::sgemm_nr * detail::sgemm_b_sliver<layout>(kc);
            if (count == 1 && runs[0].len == detail::sgemm_nr) {
              const float* src = images + runs[0].offset;
              for (index p = 0; p < kc; ++p) detail::sgemm_copy_n<detail::sgemm_nr>(dst + p * detail::sgemm_nr, src + offset[p]);
              continue;
            }
            for (int r = 0; r < count; ++r)
              for (index p = 0; p < kc; ++p)
                detail::sgemm_copy(dst + p * detail::sgemm_nr + runs[r].at, images + runs[r].offset + offset[p], runs[r].len);
          }
        } else {
          // Per pixel, the k range of its patch, kernel row by kernel row.
          index s = j0 / n_pixels, q = j0 % n_pixels;
          for (index j = 0; j < nc; ++j) {
            const float* src = images + s * image_stride + patch_base(q);
            float* dst = buf + j / detail::sgemm_nr * detail::sgemm_b_sliver<layout>(kc) + j % detail::sgemm_nr * detail::sgemm_kcs;
            for (index p = p0; p < p0 + kc;) {
              const index len = std::min(kernel_row - p % kernel_row, p0 + kc - p);
              detail::sgemm_copy(dst + (p - p0), src + patch_offset(p), len);
              p += len;
            }
            if (++q == n_pixels) q = 0, ++s;
          }
        }
      }
    };

    /// B = [cols^T 1] (k: output pixel, n: patch value, then a column of ones) of the weight and
    /// bias gradients [dW db] = dY [cols^T 1]: the parameter buffer holds db right after dW, as
    /// one more column of it, so the bias gradient comes out of the same pass over dY.
    struct PatchRows {
      static constexpr detail::BLayout layout = pixel_runs ? detail::BLayout::n_major : detail::BLayout::k_major;
      const float* images;
      void operator()(float* buf, index j0, index nc, index p0, index kc) const {
        if constexpr (pixel_runs) {
          // Per patch value, the block's kc pixels: a run per output row.
          PixelRun runs[detail::sgemm_kc];
          const int count = split_pixels(p0, kc, runs);
          for (index j = 0; j < nc; ++j) {
            float* dst = buf + j / detail::sgemm_nr * detail::sgemm_b_sliver<layout>(kc) + j % detail::sgemm_nr * detail::sgemm_kcs;
            if (j0 + j == static_cast<index>(patch)) {
              std::fill(dst, dst + kc, 1.0f);
              continue;
            }
            const float* src = images + patch_offset(j0 + j);
            for (int r = 0; r < count; ++r) detail::sgemm_copy(dst + runs[r].at, src + runs[r].offset, runs[r].len);
          }
        } else {
          // Pixel by pixel: its patch is read once, in order, and dealt out to the slivers in
          // pieces of up to NR values (split where a kernel row ends), planned once per call.
          struct Piece {
            index to, from, len;  // offset in the packed block, offset in the patch, count
          };
          const auto at = [kc](index j) {  // where column j of this block goes in a packed row
            return j / detail::sgemm_nr * detail::sgemm_b_sliver<layout>(kc) + j % detail::sgemm_nr;
          };
          const index values = std::min(nc, static_cast<index>(patch) - j0);  // the rest: the ones column
          std::vector<Piece> pieces;
          pieces.reserve(static_cast<std::size_t>(values / detail::sgemm_nr + Kernel + 2));
          for (index j = 0; j < values;) {
            const index v = j0 + j;
            const index len = std::min({detail::sgemm_nr - j % detail::sgemm_nr, kernel_row - v % kernel_row, values - j});
            pieces.push_back({at(j), patch_offset(v), len});
            j += len;
          }
          float* const ones = values < nc ? buf + at(values) : nullptr;
          for (index p = 0, s = p0 / n_pixels, q = p0 % n_pixels; p < kc; ++p) {
            const float* src = images + s * image_stride + patch_base(q);
            float* dst = buf + p * detail::sgemm_nr;
            for (const Piece& piece : pieces) {
              if (piece.len == detail::sgemm_nr) {
                detail::sgemm_copy_n<detail::sgemm_nr>(dst + piece.to, src + piece.from);
              } else {
                detail::sgemm_copy(dst + piece.to, src + piece.from, piece.len);
              }
            }
            if (ones) ones[p * detail::sgemm_nr] = 1.0f;  // the last column: db
            if (++q == n_pixels) q = 0, ++s;
          }
        }
      }
    };

    /// Copies `batch` images of rows x cols x channels into `out` with `pad` zeros around each
    /// (only the interiors are ever written, so the borders stay zero from the first resize).
    static const float* padded_copy(const float* images, std::size_t batch, std::size_t rows, std::size_t cols,
                                    std::size_t channels, std::size_t pad, Buffer<float>& out) {
      const std::size_t row = cols * channels, padded_row = (cols + 2 * pad) * channels;
      const std::size_t size = (rows + 2 * pad) * padded_row;
      if (out.size() < size * batch) out.resize(size * batch);
      for (std::size_t s = 0; s < batch; ++s)
        for (std::size_t y = 0; y < rows; ++y)
          std::memcpy(out.data() + s * size + (y + pad) * padded_row + pad * channels, images + (s * rows + y) * row,
                      row * sizeof(float));
      return out.data();
    }

    /// The images the patches are read from: the input itself, or its zero-padded copy.
    const float* patch_source(const ConstMatrixView<T>& input) {
      if constexpr (padding == 0) {
        return input.data();
      } else {
        return padded_copy(input.data(), static_cast<std::size_t>(input.cols()), H, W, C, padding, padded_);
      }
    }

    void forward_implicit(const ForwardArgs<T>& a) {
      const auto n = static_cast<index>(pixels) * a.input.cols();
      detail::sgemm_packed(static_cast<index>(Filters), n, static_cast<index>(patch),
                           detail::SgemmPackA{a.params.data(), 1, static_cast<index>(Filters)}, PatchColumns{patch_source(a.input)},
                           a.output.data(), static_cast<index>(Filters), /*accumulate=*/false,
                           a.params.data() + Filters * patch);
    }

    void backward_implicit(const BackwardArgs<T>& a) {
      const auto batch = static_cast<std::size_t>(a.input.cols());
      if (batch == 0) return;
      const auto n = static_cast<index>(pixels * batch);
      const float* dy = a.output_grad.data();
      // The patches come from the image the forward pass read (the padded copy it made, when
      // padded), as the explicit path's backward reuses the forward's cols.
      const float* images = padding == 0 ? a.input.data() : padded_.data();
      detail::sgemm_packed(static_cast<index>(Filters), static_cast<index>(patch + 1), n,
                           detail::SgemmPackA{dy, 1, static_cast<index>(Filters)}, PatchRows{images},
                           a.param_grads.data(), static_cast<index>(Filters), /*accumulate=*/true);
      if (a.wants_input_grad()) input_gradient_implicit(a);
    }

    void input_gradient_implicit(const BackwardArgs<T>& a) {
      const auto batch = static_cast<std::size_t>(a.input.cols());
      const float* dy = a.output_grad.data();

      // dx: dcols = W^T dY for a chunk of whole images at a time (at most 256 KiB of dcols, or one
      // image, which stays in L2 for col2im), with W^T packed once for all chunks.
      const auto wt = detail::sgemm_prepack_a(wt_, static_cast<index>(patch), static_cast<index>(Filters),
                                              detail::SgemmPackA{a.params.data(), static_cast<index>(Filters), 1});
      const std::size_t chunk = std::clamp<std::size_t>((std::size_t{1} << 16) / (patch * pixels), 1, batch);
      if (dcols_.size() < patch * pixels * chunk) dcols_.resize(patch * pixels * chunk);
      for (std::size_t s0 = 0; s0 < batch; s0 += chunk) {
        const std::size_t count = std::min(chunk, batch - s0);
        detail::sgemm_packed(static_cast<index>(patch), static_cast<index>(pixels * count), static_cast<index>(Filters), wt,
                             detail::SgemmPackB{dy + s0 * pixels * Filters, static_cast<index>(Filters)},
                             dcols_.data(), static_cast<index>(patch), /*accumulate=*/false);
        for (std::size_t s = 0; s < count; ++s)
          col2im(dcols_.data() + s * patch * pixels, a.input_grad.col(static_cast<Eigen::Index>(s0 + s)).data());
      }
    }

    // ---- strided products (float, filters in whole vectors, several channels) -----------------
    // The forward product goes tile by tile along an output row (a tile's pixels Stride*C apart
    // in the image); the weight gradient tile by tile along a kernel row of the patch (K*C
    // contiguous values), running over an image's output pixels. A one-channel first layer keeps
    // the packed path, which has a layout of its own for it (pixel_runs).
    using OutputTiling = detail::SgemmRowTiles<Filters, OW>;
    using InputTiling = detail::SgemmRowTiles<C, W>;
    /// Columns of a weight-gradient tile: the widest that divides a kernel row, so that a tile's
    /// patch values are contiguous in the image.
    static constexpr int gradient_columns = [] {
      for (int n = detail::sgemm_strided_max_columns(OutputTiling::vectors, true); n > 1; --n)
        if (row_len % static_cast<std::size_t>(n) == 0) return n;
      return 1;
    }();
    static constexpr bool strided = implicit_im2col && OutputTiling::fit && C % 4 == 0 && gradient_columns >= 4;
    /// The correlation multiplies H*W*K*K*F*C times, dcols = W^T dY OH*OW*K*K*F*C: the same at
    /// 'same' padding, 2.25 times as many for 5 x 5 filters on 12 x 12 images without padding.
    static constexpr bool correlated_input_gradient =
        strided && Stride == 1 && InputTiling::fit && Filters % 4 == 0 && 4 * H * W <= 5 * OH * OW;
    /// The padding of dY for the correlation: K - 1 - P on each side; a padded row's pixels.
    static constexpr std::size_t gradient_padding = Kernel - 1 - padding;
    static constexpr std::size_t WQ = OW + 2 * gradient_padding;

    /// out = the convolution, at `Step`, of zero-padded images of `Channels` values a pixel
    /// (`image_values` apart, `row_values` a padded row) with the K x K filters `w` (Tiling's rows
    /// x K*K*Channels, column (ky, kx, channel)), plus bias when given: Tiling's rows values for
    /// each of `out_rows` x Tiling's width pixels an image. The forward product, and at stride 1
    /// the input gradient as a correlation.
    template <class Tiling, std::size_t Channels, std::size_t Step>
    static void convolve_padded(const float* images, std::size_t batch, std::size_t image_values, std::size_t row_values,
                                std::size_t out_rows, const float* w, const float* bias, float* out) {
      for (std::size_t s = 0; s < batch; ++s) {
        for (std::size_t oy = 0; oy < out_rows; ++oy) {
          const float* const row = images + s * image_values + oy * Step * row_values;
          Tiling::template row<static_cast<index>(Step * Channels)>(
              w,
              [row, row_values](std::size_t x0) {
                return detail::SgemmStridedB{row + x0 * Step * Channels, static_cast<index>(Kernel), static_cast<index>(row_values),
                                             static_cast<index>(Kernel * Channels), 1};
              },
              out + (s * out_rows + oy) * Tiling::width * Tiling::rows, bias);
        }
      }
    }

    void forward_strided(const ForwardArgs<T>& a) {
      const float* const w = a.params.data();
      convolve_padded<OutputTiling, C, Stride>(patch_source(a.input), static_cast<std::size_t>(a.input.cols()), image_size, WP * C,
                                               OH, w, w + Filters * patch, a.output.data());
    }

    void backward_strided(const BackwardArgs<T>& a) {
      const auto batch = static_cast<std::size_t>(a.input.cols());
      if (batch == 0) return;
      const float* const images = padding == 0 ? a.input.data() : padded_.data();
      const float* const dy = a.output_grad.data();
      float* const dw = a.param_grads.data();
      float* const db = dw + Filters * patch;
      constexpr auto n = static_cast<std::size_t>(gradient_columns);
      constexpr int vectors = OutputTiling::vectors;
      for (std::size_t s = 0; s < batch; ++s) {
        for (std::size_t r = 0; r < Filters; r += OutputTiling::block_rows) {
          const float* const dys = dy + s * pixels * Filters + r;
          for (std::size_t j0 = 0; j0 < patch; j0 += n) {
            const detail::SgemmStridedB src{images + s * image_size + static_cast<std::size_t>(patch_offset(static_cast<index>(j0))),
                                            static_cast<index>(OH), static_cast<index>(Stride * WP * C), static_cast<index>(OW),
                                            static_cast<index>(Stride * C)};
            float* const out = dw + j0 * Filters + r;
            if (j0 == 0) {
              detail::sgemm_strided_ukernel<vectors, gradient_columns, 1, true>(dys, static_cast<index>(Filters), src, out,
                                                                               static_cast<index>(Filters), true, nullptr, db + r);
            } else {
              detail::sgemm_strided_ukernel<vectors, gradient_columns, 1>(dys, static_cast<index>(Filters), src, out,
                                                                          static_cast<index>(Filters), true, nullptr);
            }
          }
        }
      }
      if (!a.wants_input_grad()) return;
      if constexpr (correlated_input_gradient) {
        input_gradient_correlated(a);
      } else {
        input_gradient_implicit(a);
      }
    }

    /// dX = dY (padded by K - 1 - P) correlated with the flipped filters, filters and channels
    /// swapped: dx(y, x, c) = sum over (ky, kx, f) of dYp(y + ky, x + kx, f) W(f, K-1-ky, K-1-kx, c).
    void input_gradient_correlated(const BackwardArgs<T>& a) {
      const auto batch = static_cast<std::size_t>(a.input.cols());
      // The flipped filters as a C x (K*K*F) matrix, column (ky, kx, f).
      if (flipped_.size() < C * Kernel * Kernel * Filters) flipped_.resize(C * Kernel * Kernel * Filters);
      const float* const w = a.params.data();
      for (std::size_t ky = 0; ky < Kernel; ++ky)
        for (std::size_t kx = 0; kx < Kernel; ++kx)
          for (std::size_t f = 0; f < Filters; ++f) {
            const float* src = w + f + (((Kernel - 1 - ky) * Kernel + (Kernel - 1 - kx)) * C) * Filters;
            float* dst = flipped_.data() + ((ky * Kernel + kx) * Filters + f) * C;
            for (std::size_t c = 0; c < C; ++c) dst[c] = src[c * Filters];
          }
      const float* const dyp = gradient_padding == 0 ? a.output_grad.data()
                                                     : padded_copy(a.output_grad.data(), batch, OH, OW, Filters, gradient_padding, padded_dy_);
      convolve_padded<InputTiling, Filters, 1>(dyp, batch, (OH + 2 * gradient_padding) * WQ * Filters, WQ * Filters, H,
                                               flipped_.data(), nullptr, a.input_grad.data());
    }

    // Visits every (output pixel, kernel row) pair: `run(col, x_offset, kx_begin, kx_end)` for the
    // in-bounds part of the row; the caller handles the out-of-bounds rest (padding).
    template <class RowFn>
    static void for_each_patch_row(RowFn&& row) {
      for (std::size_t oy = 0; oy < OH; ++oy) {
        for (std::size_t ox = 0; ox < OW; ++ox) {
          const std::size_t q = oy * OW + ox;
          for (std::size_t ky = 0; ky < Kernel; ++ky) {
            const auto iy = static_cast<std::ptrdiff_t>(oy * Stride + ky) - static_cast<std::ptrdiff_t>(padding);
            const auto ix0 = static_cast<std::ptrdiff_t>(ox * Stride) - static_cast<std::ptrdiff_t>(padding);
            const std::size_t col_offset = q * patch + ky * Kernel * C;
            if (iy < 0 || iy >= static_cast<std::ptrdiff_t>(H)) {
              row(col_offset, std::size_t{0}, std::size_t{0}, std::size_t{0});
              continue;
            }
            const auto kx_begin = static_cast<std::size_t>(std::max<std::ptrdiff_t>(0, -ix0));
            const auto kx_end = static_cast<std::size_t>(
                std::min<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(Kernel), static_cast<std::ptrdiff_t>(W) - ix0));
            const auto x_offset = (static_cast<std::size_t>(iy) * W + static_cast<std::size_t>(ix0 + static_cast<std::ptrdiff_t>(kx_begin))) * C;
            row(col_offset, x_offset, kx_begin, kx_end);
          }
        }
      }
    }

    static void im2col(const T* x, T* cols) {
      for_each_patch_row([&](std::size_t col, std::size_t xo, std::size_t kb, std::size_t ke) {
        T* dst = cols + col;
        if constexpr (padding > 0) {
          std::fill(dst, dst + kb * C, T(0));
          std::fill(dst + std::max(kb, ke) * C, dst + Kernel * C, T(0));
        }
        if (ke > kb) std::memcpy(dst + kb * C, x + xo, (ke - kb) * C * sizeof(T));
      });
    }

    static void col2im(const T* cols, T* dx) {
      std::fill(dx, dx + In::size, T(0));
      for_each_patch_row([&](std::size_t col, std::size_t xo, std::size_t kb, std::size_t ke) {
        const T* src = cols + col + kb * C;
        T* dst = dx + xo;
        const std::size_t n = (ke > kb ? ke - kb : 0) * C;
        if constexpr (std::is_same_v<T, float>) {
          detail::sgemm_add(dst, src, static_cast<index>(n));  // vector adds with a masked tail
        } else {
          for (std::size_t i = 0; i < n; ++i) dst[i] += src[i];
        }
      });
    }

    Buffer<T> cols_;     // explicit path: the im2col matrix of the last forward pass
    Buffer<T> dcols_;    // W^T dY (explicit path: whole batch; implicit path: one chunk)
    Buffer<T> padded_;   // implicit path, padding > 0: the zero-padded input images
    Buffer<float> wt_;   // implicit path: W^T packed for the input gradient
    Buffer<float> flipped_;     // correlated input gradient: the flipped filters, C x (K*K*F)
    Buffer<float> padded_dy_;   // correlated input gradient: dY padded by K - 1 - P
  };
};

}  // namespace flotilla
#endif  // FLOTILLA_NN_CONV2D_HPP_INCLUDED
