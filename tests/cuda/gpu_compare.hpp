// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Helpers of the GPU tests: device <-> host copies and the comparison with the CPU's results.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "flotilla/core/random.hpp"
#include "flotilla/cuda/buffer.hpp"

namespace flotilla_test {

template <class T>
flotilla::cuda::DeviceBuffer<T> to_device(std::span<const T> host) {
  flotilla::cuda::DeviceBuffer<T> d(host.size());
  FLOTILLA_CUDA_CHECK(cudaMemcpy(d.data(), host.data(), host.size_bytes(), cudaMemcpyHostToDevice));
  return d;
}
template <class T>
std::vector<T> to_host(const T* device, std::size_t n) {
  std::vector<T> h(n);
  FLOTILLA_CUDA_CHECK(cudaDeviceSynchronize());
  FLOTILLA_CUDA_CHECK(cudaMemcpy(h.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

inline std::vector<float> normal_values(std::size_t n, std::uint64_t seed, double sd = 1.0) {
  flotilla::Generator g(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(sd * g.normal<double>());
  return v;
}

/// max |gpu - cpu| / max |cpu| (0 when both are all zero): "within 1e-5 relative" is this <= 1e-5.
/// Relative to the largest value rather than element by element: an element that is a sum of
/// terms cancelling to near zero carries the rounding of its terms, not of itself.
inline double relative_difference(std::span<const float> gpu, std::span<const float> cpu) {
  REQUIRE(gpu.size() == cpu.size());
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(gpu[i]) - static_cast<double>(cpu[i])));
    scale = std::max(scale, std::abs(static_cast<double>(cpu[i])));
  }
  return scale == 0 ? diff : diff / scale;
}

#define FLOTILLA_CHECK_CLOSE(what, gpu, cpu, tolerance)                                             \
  do {                                                                                             \
    const double flotilla_rd = ::flotilla_test::relative_difference((gpu), (cpu));                 \
    INFO(what << ": relative difference " << flotilla_rd);                                         \
    CHECK(flotilla_rd <= (tolerance));                                                             \
  } while (false)

}  // namespace flotilla_test
