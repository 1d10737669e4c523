// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CUDA_BATCHNORM_HPP_INCLUDED
#define FLOTILLA_CUDA_BATCHNORM_HPP_INCLUDED
// The normalisations' kernels on the GPU (nn/batch_norm.hpp and nn/layer_norm.hpp are the CPU
// layers they follow). Batch normalisation's:
// per-channel sums in double, taken in a fixed order (a block per channel and chunk of the values,
// a tree in shared memory, then the chunks added in order), so that a run gives the same bits every
// time; the per-channel arithmetic in double, as the CPU layer does it; the element-wise passes in
// float. Values are channels-last: value i of a batch belongs to channel i % C.
#include <cstddef>

#include "flotilla/cuda/index_math.hpp"
#include "flotilla/cuda/launch.hpp"

namespace flotilla::cuda::detail {

inline constexpr unsigned channel_sum_threads = 256;
/// Values a block of channel_sum_threads adds up per channel (chunks: ceil(n / this)).
inline constexpr index_t channel_sum_chunk = 16 * channel_sum_threads;

inline index_t channel_sum_chunks(index_t vectors) { return (vectors + channel_sum_chunk - 1) / channel_sum_chunk; }

/// The block's sums of its channel_sum_threads threads' pairs, by a tree in shared memory (a
/// fixed order); valid in thread 0.
__device__ inline double2 block_pair_sum(double2 mine) {
  __shared__ double first[channel_sum_threads], second[channel_sum_threads];
  first[threadIdx.x] = mine.x;
  second[threadIdx.x] = mine.y;
  __syncthreads();
  for (unsigned half = channel_sum_threads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      first[threadIdx.x] += first[threadIdx.x + half];
      second[threadIdx.x] += second[threadIdx.x + half];
    }
    __syncthreads();
  }
  return double2{first[0], second[0]};
}

/// partial[(chunk * C + c) * 2 + j] = sum over the chunk's vectors v of pair(v, c)[j]; blockIdx.x is
/// the chunk, blockIdx.y the channel.
template <class Pair>
__global__ void channel_partial_sums(index_t vectors, index_t C, Pair pair, double* partial) {
  const index_t c = blockIdx.y, begin = static_cast<index_t>(blockIdx.x) * channel_sum_chunk;
  const index_t end = begin + channel_sum_chunk < vectors ? begin + channel_sum_chunk : vectors;
  double2 mine{0, 0};
  for (index_t v = begin + threadIdx.x; v < end; v += channel_sum_threads) {
    const double2 p = pair(v, c);
    mine.x += p.x;
    mine.y += p.y;
  }
  const double2 sum = block_pair_sum(mine);
  if (threadIdx.x == 0) {
    partial[(static_cast<index_t>(blockIdx.x) * C + c) * 2] = sum.x;
    partial[(static_cast<index_t>(blockIdx.x) * C + c) * 2 + 1] = sum.y;
  }
}

/// sums[c] and sums[C + c]: the two sums of pair(v, c) over every vector v, chunks in order.
/// `partial` holds 2 * C * channel_sum_chunks(vectors) doubles.
template <class Pair>
void channel_sums(cudaStream_t s, index_t vectors, index_t C, Pair pair, double* partial, double* sums) {
  const index_t chunks = channel_sum_chunks(vectors);
  if (chunks == 0) {
    for_each_index(s, static_cast<std::size_t>(2 * C), "channel_sums_zero", [=] __device__(index_t i) { sums[i] = 0; });
    return;
  }
  channel_partial_sums<<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(C)), channel_sum_threads, 0, s>>>(
      vectors, C, pair, partial);
  FLOTILLA_CUDA_CHECK_LAUNCH("channel_partial_sums");
  for_each_index(s, static_cast<std::size_t>(C), "channel_sums", [=] __device__(index_t c) {
    double a = 0, b = 0;
    for (index_t k = 0; k < chunks; ++k) {
      a += partial[(k * C + c) * 2];
      b += partial[(k * C + c) * 2 + 1];
    }
    sums[c] = a;
    sums[C + c] = b;
  });
}

/// What forward leaves for backward, per channel, in double: mean, biased variance, 1 / std.
struct NormStatistics {
  double* mean;
  double* var;
  double* inv_std;
};

/// From the sums of x and x^2 over `count` values (training), or from the running estimates
/// (evaluation): the statistics, and y = x * scale + shift's scale and shift in float.
inline void norm_statistics(cudaStream_t s, index_t C, const double* sums, double count, const float* gamma,
                            const float* beta, const float* running_mean, const float* running_var, bool trained,
                            double epsilon, NormStatistics st, float* scale, float* shift) {
  for_each_index(s, static_cast<std::size_t>(C), "norm_statistics", [=] __device__(index_t c) {
    double mean = 0, var = 0;
    if (trained) {
      mean = sums[c] / count;
      var = sums[C + c] / count - mean * mean;
      var = var > 0 ? var : 0;
    } else {
      mean = static_cast<double>(running_mean[c]);
      var = static_cast<double>(running_var[c]);
    }
    const double inv_std = 1.0 / sqrt(var + epsilon);
    st.mean[c] = mean;
    st.var[c] = var;
    st.inv_std[c] = inv_std;
    scale[c] = static_cast<float>(static_cast<double>(gamma[c]) * inv_std);
    shift[c] = static_cast<float>(static_cast<double>(beta[c]) - mean * static_cast<double>(gamma[c]) * inv_std);
  });
}

inline void norm_apply(cudaStream_t s, const float* x, float* y, index_t C, std::size_t n, const float* scale,
                       const float* shift) {
  for_each_index(s, n, "norm_apply", [=] __device__(index_t i) {
    const index_t c = i % C;
    y[i] = x[i] * scale[c] + shift[c];
  });
}

/// dbeta += sum dy, dgamma += sum dy xhat (this call's); in training, the running estimates'
/// increments, weighted by `weight` (this call's share of the update times the momentum).
inline void norm_parameter_grads(cudaStream_t s, index_t C, const double* grad_sums, NormStatistics st,
                                 const float* running, float* grads, bool trained, double weight, double count) {
  for_each_index(s, static_cast<std::size_t>(C), "norm_parameter_grads", [=] __device__(index_t c) {
    grads[C + c] += static_cast<float>(grad_sums[c]);
    grads[c] += static_cast<float>(grad_sums[C + c]);
    if (trained && weight != 0) {
      const double unbiased = st.var[c] * count / (count - 1);
      grads[2 * C + c] += static_cast<float>(weight * (st.mean[c] - static_cast<double>(running[c])));
      grads[3 * C + c] += static_cast<float>(weight * (unbiased - static_cast<double>(running[C + c])));
    }
  });
}

/// dx = scale * (dy - mean(dy) - xhat * mean(dy xhat)) from the sums over `count` values; in
/// evaluation (the statistics constants), dx = scale * dy.
inline void norm_input_grad(cudaStream_t s, const float* x, const float* dy, float* dx, index_t C, std::size_t n,
                            const float* scale, NormStatistics st, const double* grad_sums, double count, bool trained) {
  for_each_index(s, n, "norm_input_grad", [=] __device__(index_t i) {
    const index_t c = i % C;
    if (!trained) {
      dx[i] = dy[i] * scale[c];
      return;
    }
    const float mean_dy = static_cast<float>(grad_sums[c] / count);
    const float mean_dy_xhat = static_cast<float>(grad_sums[C + c] / count);
    const float xhat = (x[i] - static_cast<float>(st.mean[c])) * static_cast<float>(st.inv_std[c]);
    dx[i] = scale[c] * (dy[i] - mean_dy - xhat * mean_dy_xhat);
  });
}

// ---- LayerNorm: statistics per sample ----------------------------------------------------------

/// sums[s] and sums[samples + s]: the two sums of pair(s, i) over the D values i of sample s; one
/// block a sample, a tree in shared memory (a fixed order, as channel_sums).
template <class Pair>
__global__ void sample_sums_kernel(index_t D, Pair pair, index_t samples, double* sums) {
  const index_t s = blockIdx.x;
  double2 mine{0, 0};
  for (index_t i = threadIdx.x; i < D; i += channel_sum_threads) {
    const double2 p = pair(s, i);
    mine.x += p.x;
    mine.y += p.y;
  }
  const double2 sum = block_pair_sum(mine);
  if (threadIdx.x == 0) {
    sums[s] = sum.x;
    sums[samples + s] = sum.y;
  }
}

template <class Pair>
void sample_sums(cudaStream_t s, index_t samples, index_t D, Pair pair, double* sums) {
  if (samples == 0) return;
  sample_sums_kernel<<<static_cast<unsigned>(samples), channel_sum_threads, 0, s>>>(D, pair, samples, sums);
  FLOTILLA_CUDA_CHECK_LAUNCH("sample_sums");
}

}  // namespace flotilla::cuda::detail
#endif  // FLOTILLA_CUDA_BATCHNORM_HPP_INCLUDED
