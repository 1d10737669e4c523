#pragma once
// The built-in optimizers' updates on the GPU, over the flat device buffers: optim::SGD,
// optim::Momentum (heavy-ball and Nesterov), optim::Adam and optim::AdamW, each element computed
// exactly as optim/sgd.hpp and optim/adam.hpp compute it (the same float operations; nvcc may fuse
// a multiply and an add, so results agree to float rounding). Per-tensor behaviour (no weight decay
// on biases when decay_biases is false) is kept by launching once per run of consecutive tensors
// that decay alike: one launch for the whole buffer in the usual cases.
#include <cmath>
#include <cstddef>
#include <span>
#include <type_traits>

#include "flotilla/cuda/launch.hpp"
#include "flotilla/core/layer_args.hpp"
#include "flotilla/optim/adam.hpp"
#include "flotilla/optim/sgd.hpp"

namespace flotilla::cuda {

/// Whether optimizer O has a GPU update here (any other runs on the host: cuda::Engine copies).
template <class O>
inline constexpr bool has_device_update = std::is_same_v<O, optim::SGD> || std::is_same_v<O, optim::Momentum> ||
                                          std::is_same_v<O, optim::Adam> || std::is_same_v<O, optim::AdamW>;

/// How many state buffers (each one value per parameter) O keeps: SGD 0, Momentum 1, Adam(W) 2.
template <class O>
inline constexpr std::size_t device_state_buffers = std::is_same_v<O, optim::SGD> ? 0 : std::is_same_v<O, optim::Momentum> ? 1 : 2;

namespace detail {

/// Calls f(begin, count, decay) for each maximal run of consecutive tensors that decay alike.
template <class F>
void for_each_decay_run(std::span<const TensorInfo> tensors, double weight_decay, bool decay_biases, F&& f) {
  std::size_t i = 0;
  while (i < tensors.size()) {
    const bool decay = weight_decay != 0 && optim::detail::decays(tensors[i], decay_biases);
    std::size_t j = i + 1;
    while (j < tensors.size() && (weight_decay != 0 && optim::detail::decays(tensors[j], decay_biases)) == decay &&
           tensors[j].offset == tensors[j - 1].offset + tensors[j - 1].size)
      ++j;
    f(tensors[i].offset, tensors[j - 1].offset + tensors[j - 1].size - tensors[i].offset, decay);
    i = j;
  }
}

}  // namespace detail

/// One step of optimizer o on device buffers p and g (and its state buffers `state[k]`, each as long
/// as p), for the parameter tensors `tensors` (offsets into p), on stream s.
template <class O>
void device_update(cudaStream_t s, const O& o, float* p, const float* g, float* const* state,
                   std::span<const TensorInfo> tensors, const StepInfo& info) {
  static_assert(has_device_update<O>, "cuda::device_update: no GPU update for this optimizer");
  const float lr = static_cast<float>(info.learning_rate);
  if constexpr (std::is_same_v<O, optim::SGD>) {
    const float wd = static_cast<float>(o.weight_decay);
    detail::for_each_decay_run(tensors, o.weight_decay, o.decay_biases, [&](std::size_t at, std::size_t n, bool decay) {
      float* pp = p + at;
      const float* gg = g + at;
      if (decay) {
        detail::for_each_index(s, n, "sgd_update", [=] __device__(index_t i) { pp[i] -= lr * (gg[i] + wd * pp[i]); });
      } else {
        detail::for_each_index(s, n, "sgd_update", [=] __device__(index_t i) { pp[i] -= lr * gg[i]; });
      }
    });
  } else if constexpr (std::is_same_v<O, optim::Momentum>) {
    const float mu = static_cast<float>(o.momentum), wd = static_cast<float>(o.weight_decay);
    const bool nesterov = o.nesterov;
    detail::for_each_decay_run(tensors, o.weight_decay, o.decay_biases, [&](std::size_t at, std::size_t n, bool decay) {
      float* pp = p + at;
      float* vv = state[0] + at;
      const float* gg = g + at;
      const float w = decay ? wd : 0.0f;
      detail::for_each_index(s, n, "momentum_update", [=] __device__(index_t i) {
        const float gi = w != 0.0f ? gg[i] + w * pp[i] : gg[i];
        const float v = mu * vv[i] + gi;
        vv[i] = v;
        pp[i] -= nesterov ? lr * (gi + mu * v) : lr * v;
      });
    });
  } else {
    constexpr bool decoupled = std::is_same_v<O, optim::AdamW>;
    const double t = static_cast<double>(info.step);
    // The same float constants as optim/adam.hpp, computed in double on the host as it does.
    const float b1 = static_cast<float>(o.beta1), b2 = static_cast<float>(o.beta2);
    const float step_size = static_cast<float>(info.learning_rate / (1 - std::pow(o.beta1, t)));
    const float root_correction = static_cast<float>(std::sqrt(1 - std::pow(o.beta2, t)));
    const float eps = static_cast<float>(o.epsilon), wd = static_cast<float>(o.weight_decay);
    detail::for_each_decay_run(tensors, o.weight_decay, o.decay_biases, [&](std::size_t at, std::size_t n, bool decay) {
      float* pp = p + at;
      float* mm = state[0] + at;
      float* vv = state[1] + at;
      const float* gg = g + at;
      detail::for_each_index(s, n, decoupled ? "adamw_update" : "adam_update", [=] __device__(index_t i) {
        float pi = pp[i], gi = gg[i];
        if (decoupled) {
          if (decay) pi *= 1.0f - lr * wd;
        } else if (decay) {
          gi = gi + wd * pi;
        }
        const float m = b1 * mm[i] + (1.0f - b1) * gi;
        const float v = b2 * vv[i] + (1.0f - b2) * (gi * gi);
        mm[i] = m;
        vv[i] = v;
        pp[i] = pi - step_size * m / (sqrtf(v) / root_correction + eps);
      });
    });
  }
}

}  // namespace flotilla::cuda
