// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_LOSS_SOFTMAXCROSSENTROPY_HPP_INCLUDED
#define FLOTILLA_LOSS_SOFTMAXCROSSENTROPY_HPP_INCLUDED
// Softmax followed by cross-entropy, fused: the gradient is softmax(z) - onehot(label), computed
// from logits shifted by their maximum so that exp() never overflows, and the loss is
// logsumexp(z) - z[label], which stays finite for any finite logits. The per-sample body is one
// function for the CPU and the GPU (cuda/loss.hpp).
#include <cstdint>
#include <string>
#include <string_view>

#include "flotilla/core/element_math.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/host_device.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/core/targets.hpp"

namespace flotilla {

struct SoftmaxCrossEntropy {
  static constexpr std::string_view name = "SoftmaxCrossEntropy";
  static constexpr TargetKind target = TargetKind::labels;

  template <class T>
  static T value(ConstMatrixView<T> logits, const Targets<T>& t) {
    return run<T>(logits, t, nullptr, T(0));
  }

  template <class T>
  static T value_and_gradient(ConstMatrixView<T> logits, const Targets<T>& t, MatrixView<T> grad, T scale) {
    return run(logits, t, grad.data(), scale);
  }

  /// One sample: the loss from its `classes` logits z, and, when `grad` is not null, grad =
  /// scale * (softmax(z) - onehot(label)); when `predicted` is not null, the first arg-max of z.
  /// `label` must be in [0, classes). Both engines run this: the CPU once per column, the GPU once
  /// per thread.
  FLOTILLA_HOST_DEVICE_TEMPLATE
  template <class T, class Index>
  FLOTILLA_HOST_DEVICE static T sample(const T* z, Index classes, Index label, T* grad, T scale, Index* predicted) {
    T m = z[0];
    Index best = 0;
    for (Index j = 1; j < classes; ++j)
      if (z[j] > m) m = z[j], best = j;
    if (predicted) *predicted = best;
    T sum = 0;
    if (grad) {
      // exp(z - m) is computed once: kept in the gradient, then normalised.
      for (Index j = 0; j < classes; ++j) sum += (grad[j] = element::exp(z[j] - m));
      const T f = scale / sum;
      for (Index j = 0; j < classes; ++j) grad[j] *= f;
      grad[label] -= scale;
    } else {
      for (Index j = 0; j < classes; ++j) sum += element::exp(z[j] - m);
    }
    return element::log(sum) + m - z[label];
  }

 private:
  template <class T>
  static T run(ConstMatrixView<T> logits, const Targets<T>& t, T* grad, T scale) {
    const auto classes = logits.rows();
    if (static_cast<std::size_t>(logits.cols()) != t.labels.size())
      throw ShapeError("SoftmaxCrossEntropy: " + std::to_string(logits.cols()) + " outputs but " +
                       std::to_string(t.labels.size()) + " labels");
    double total = 0;
    for (Eigen::Index s = 0; s < logits.cols(); ++s) {
      const std::int32_t label = t.labels[static_cast<std::size_t>(s)];
      if (label < 0 || label >= classes)
        throw ShapeError("SoftmaxCrossEntropy: label " + std::to_string(label) + " of sample " + std::to_string(s) +
                         " is outside [0, " + std::to_string(classes) + ")");
      total += static_cast<double>(sample<T, Eigen::Index>(logits.data() + s * classes, classes, label,
                                                           grad ? grad + s * classes : nullptr, scale, nullptr));
    }
    return static_cast<T>(total);
  }
};

}  // namespace flotilla
#endif  // FLOTILLA_LOSS_SOFTMAXCROSSENTROPY_HPP_INCLUDED
