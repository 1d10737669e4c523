// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_LOSS_BINARYCROSSENTROPY_HPP_INCLUDED
#define FLOTILLA_LOSS_BINARYCROSSENTROPY_HPP_INCLUDED
// Binary cross-entropy on logits, fused with the sigmoid: per output, with logit x and target y in
// [0, 1] (a click: 1, none: 0),
//
//   loss = max(x, 0) - x y + log1p(exp(-|x|))     (= -y log s(x) - (1 - y) log(1 - s(x)))
//   d loss / dx = s(x) - y,  s the sigmoid,
//
// both written so that exp() only ever sees a non-positive argument: finite and accurate at any
// finite logit, where the naive form overflows or takes log(0) from |x| ~ 90 in float. A sample's
// loss is the mean over its outputs (a click model has one). The per-sample body is one function
// for the CPU and the GPU.
#include <cmath>
#include <string>
#include <string_view>
#include <type_traits>

#include "flotilla/core/element_math.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/host_device.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/core/targets.hpp"

namespace flotilla {

struct BinaryCrossEntropyWithLogits {
  static constexpr std::string_view name = "BinaryCrossEntropyWithLogits";
  static constexpr TargetKind target = TargetKind::values;

  template <class T>
  static T value(ConstMatrixView<T> logits, const Targets<T>& t) {
    check(logits, t);
    return run<T>(logits, t, nullptr, T(0));
  }

  template <class T>
  static T value_and_gradient(ConstMatrixView<T> logits, const Targets<T>& t, MatrixView<T> grad, T scale) {
    check(logits, t);
    return run(logits, t, grad.data(), scale / static_cast<T>(logits.rows()));
  }

  /// One sample of `outputs` logits x and targets y: the mean over outputs of the loss, summed in
  /// double; when `grad` is not null, grad = (s(x) - y) * factor. Both engines run this, once per
  /// sample.
  FLOTILLA_HOST_DEVICE_TEMPLATE
  template <class T, class Index>
  FLOTILLA_HOST_DEVICE static T sample(const T* x, const T* y, Index outputs, T* grad, T factor) {
    double sum = 0;
    for (Index j = 0; j < outputs; ++j) {
      const T z = x[j];
      // e = exp(-|x|) is in (0, 1]: no overflow, and 1 + e never rounds log's argument to 0.
      const T e = element::exp(z < T(0) ? z : -z);
      const T positive = z > T(0) ? z : T(0);
      sum += static_cast<double>(positive - z * y[j] + log1p(e));
      if (grad) {
        // s(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) below: each side divides by a value in [1, 2].
        const T s = z >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e);
        grad[j] = (s - y[j]) * factor;
      }
    }
    return static_cast<T>(sum / static_cast<double>(outputs));
  }

 private:
  FLOTILLA_HOST_DEVICE_TEMPLATE
  template <class T>
  FLOTILLA_HOST_DEVICE static T log1p(T v) {
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<T, float>) return ::log1pf(v); else return ::log1p(v);
#else
    return std::log1p(v);
#endif
  }

  template <class T>
  static T run(ConstMatrixView<T> x, const Targets<T>& t, T* grad, T factor) {
    const Eigen::Index outputs = x.rows();
    double total = 0;
    for (Eigen::Index s = 0; s < x.cols(); ++s)
      total += static_cast<double>(sample<T, Eigen::Index>(x.data() + s * outputs, t.values.data() + s * outputs,
                                                           outputs, grad ? grad + s * outputs : nullptr, factor));
    return static_cast<T>(total);
  }

  template <class T>
  static void check(ConstMatrixView<T> x, const Targets<T>& t) {
    if (x.rows() != t.values.rows() || x.cols() != t.values.cols())
      throw ShapeError("BinaryCrossEntropyWithLogits: output is " + std::to_string(x.rows()) + "x" +
                       std::to_string(x.cols()) + " but targets are " + std::to_string(t.values.rows()) + "x" +
                       std::to_string(t.values.cols()));
    // A target outside [0, 1] (a label read as -1 or 2, a NaN) would give a loss with no meaning
    // and gradients that push without bound.
    for (Eigen::Index s = 0; s < t.values.cols(); ++s)
      for (Eigen::Index j = 0; j < t.values.rows(); ++j) {
        const T y = t.values(j, s);
        if (!(y >= T(0) && y <= T(1)))
          throw ShapeError("BinaryCrossEntropyWithLogits: target " + std::to_string(static_cast<double>(y)) +
                           " of sample " + std::to_string(s) + ", output " + std::to_string(j) +
                           " is outside [0, 1]");
      }
  }
};

}  // namespace flotilla
#endif  // FLOTILLA_LOSS_BINARYCROSSENTROPY_HPP_INCLUDED
