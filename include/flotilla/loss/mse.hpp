// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_LOSS_MSE_HPP_INCLUDED
#define FLOTILLA_LOSS_MSE_HPP_INCLUDED
// Mean squared error: per sample, the mean over outputs of (y - target)^2. The per-sample body is
// one function for the CPU and the GPU (cuda/loss.hpp).
#include <string>
#include <string_view>

#include "flotilla/core/error.hpp"
#include "flotilla/core/host_device.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/core/targets.hpp"

namespace flotilla {

struct MSE {
  static constexpr std::string_view name = "MSE";
  static constexpr TargetKind target = TargetKind::values;

  template <class T>
  static T value(ConstMatrixView<T> y, const Targets<T>& t) {
    check(y, t);
    return run<T>(y, t, nullptr, T(0));
  }

  template <class T>
  static T value_and_gradient(ConstMatrixView<T> y, const Targets<T>& t, MatrixView<T> grad, T scale) {
    check(y, t);
    return run(y, t, grad.data(), T(2) * scale / static_cast<T>(y.rows()));
  }

  /// One sample of `outputs` values y and targets t: mean (y - t)^2, summed in double; when `grad`
  /// is not null, grad = (y - t) * factor. Both engines run this, once per sample.
  FLOTILLA_HOST_DEVICE_TEMPLATE
  template <class T, class Index>
  FLOTILLA_HOST_DEVICE static T sample(const T* y, const T* t, Index outputs, T* grad, T factor) {
    double sum = 0;
    for (Index j = 0; j < outputs; ++j) {
      const T d = y[j] - t[j];
      sum += static_cast<double>(d) * static_cast<double>(d);
      if (grad) grad[j] = d * factor;
    }
    return static_cast<T>(sum / static_cast<double>(outputs));
  }

 private:
  template <class T>
  static T run(ConstMatrixView<T> y, const Targets<T>& t, T* grad, T factor) {
    const Eigen::Index outputs = y.rows();
    double total = 0;
    for (Eigen::Index s = 0; s < y.cols(); ++s)
      total += static_cast<double>(sample<T, Eigen::Index>(y.data() + s * outputs, t.values.data() + s * outputs, outputs,
                                                           grad ? grad + s * outputs : nullptr, factor));
    return static_cast<T>(total);
  }

  template <class T>
  static void check(ConstMatrixView<T> y, const Targets<T>& t) {
    if (y.rows() != t.values.rows() || y.cols() != t.values.cols())
      throw ShapeError("MSE: output is " + std::to_string(y.rows()) + "x" + std::to_string(y.cols()) +
                       " but targets are " + std::to_string(t.values.rows()) + "x" +
                       std::to_string(t.values.cols()));
  }
};

}  // namespace flotilla
#endif  // FLOTILLA_LOSS_MSE_HPP_INCLUDED
