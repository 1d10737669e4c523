// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CUDA_CODEC_HPP_INCLUDED
#define FLOTILLA_CUDA_CODEC_HPP_INCLUDED
// The 16-bit codecs as GPU kernels: float <-> binary16 (codec::Fp16) and float <-> bfloat16
// (codec::Bf16, rounding; codec::Bf16Truncate), so that a compressed gradient leaves the GPU at half
// the bytes and nothing stages fp32 through the host. Each thread calls the codecs' scalar
// references (detail::fp16_from_float and friends: constexpr, integer arithmetic only), so the
// kernels agree with the CPU codecs bit for bit by construction: rounding to nearest even,
// subnormals kept, finite overflow saturating, inf kept, NaN quieted. The bytes are the wire format
// (little-endian 16-bit codes: CUDA GPUs are little-endian).
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "flotilla/codec/bf16.hpp"
#include "flotilla/codec/fp16.hpp"
#include "flotilla/cuda/launch.hpp"

namespace flotilla::cuda {

/// Whether Codec has GPU kernels here.
template <class Codec>
inline constexpr bool has_device_codec =
    std::is_same_v<Codec, codec::Fp16> || std::is_same_v<Codec, codec::Bf16> || std::is_same_v<Codec, codec::Bf16Truncate>;

/// codes[i] = Codec's 16-bit code of values[i], n values, on stream s (device pointers).
template <class Codec>
void device_encode(cudaStream_t s, const float* values, std::uint16_t* codes, std::size_t n) {
  static_assert(has_device_codec<Codec>, "cuda::device_encode: no GPU kernel for this codec (fp16, bf16, bf16-truncate)");
  if constexpr (std::is_same_v<Codec, codec::Fp16>) {
    detail::for_each_index(s, n, "fp16_encode", [=] __device__(index_t i) { codes[i] = flotilla::detail::fp16_from_float(values[i]); });
  } else if constexpr (std::is_same_v<Codec, codec::Bf16>) {
    detail::for_each_index(s, n, "bf16_encode", [=] __device__(index_t i) { codes[i] = flotilla::detail::bf16_from_float(values[i]); });
  } else {
    detail::for_each_index(s, n, "bf16_truncate_encode",
                           [=] __device__(index_t i) { codes[i] = flotilla::detail::bf16_truncate_from_float(values[i]); });
  }
}

/// values[i] = (or += when `add`) the float that code[i] stands for.
template <class Codec>
void device_decode(cudaStream_t s, const std::uint16_t* codes, float* values, std::size_t n, bool add = false) {
  static_assert(has_device_codec<Codec>, "cuda::device_decode: no GPU kernel for this codec (fp16, bf16, bf16-truncate)");
  if constexpr (std::is_same_v<Codec, codec::Fp16>) {
    if (add) {
      detail::for_each_index(s, n, "fp16_decode_add", [=] __device__(index_t i) { values[i] += flotilla::detail::float_from_fp16(codes[i]); });
    } else {
      detail::for_each_index(s, n, "fp16_decode", [=] __device__(index_t i) { values[i] = flotilla::detail::float_from_fp16(codes[i]); });
    }
  } else {
    if (add) {
      detail::for_each_index(s, n, "bf16_decode_add", [=] __device__(index_t i) { values[i] += flotilla::detail::float_from_bf16(codes[i]); });
    } else {
      detail::for_each_index(s, n, "bf16_decode", [=] __device__(index_t i) { values[i] = flotilla::detail::float_from_bf16(codes[i]); });
    }
  }
}

/// Error feedback on the GPU (codec::ErrorFeedback's round trip, value by value, in the same float
/// operations, so bit-identical to it): v = residual[i] + values[i]; codes[i] = Codec's code of v;
/// residual[i] = v - decode(codes[i]), or 0 where that is not finite (an inf sent as it is).
template <class Codec>
void device_encode_with_feedback(cudaStream_t s, const float* values, float* residual, std::uint16_t* codes, std::size_t n) {
  static_assert(has_device_codec<Codec>, "cuda::device_encode_with_feedback: no GPU kernel for this codec (fp16, bf16, bf16-truncate)");
  detail::for_each_index(s, n, "encode_with_feedback", [=] __device__(index_t i) {
    const float v = residual[i] + values[i];
    std::uint16_t c;
    float back;
    if constexpr (std::is_same_v<Codec, codec::Fp16>) {
      c = flotilla::detail::fp16_from_float(v);
      back = flotilla::detail::float_from_fp16(c);
    } else if constexpr (std::is_same_v<Codec, codec::Bf16>) {
      c = flotilla::detail::bf16_from_float(v);
      back = flotilla::detail::float_from_bf16(c);
    } else {
      c = flotilla::detail::bf16_truncate_from_float(v);
      back = flotilla::detail::float_from_bf16(c);
    }
    codes[i] = c;
    const float r = v - back;
    residual[i] = isfinite(r) ? r : 0.0f;
  });
}

}  // namespace flotilla::cuda
#endif  // FLOTILLA_CUDA_CODEC_HPP_INCLUDED
