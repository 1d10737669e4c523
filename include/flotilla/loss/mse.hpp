#pragma once
// Mean squared error: per sample, the mean over outputs of (y - target)^2.
#include <string>
#include <string_view>

#include "flotilla/core/error.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/core/targets.hpp"

namespace flotilla {

struct MSE {
  static constexpr std::string_view name = "MSE";
  static constexpr TargetKind target = TargetKind::values;

  template <class T>
  static T value(ConstMatrixView<T> y, const Targets<T>& t) {
    check(y, t);
    return static_cast<T>((y - t.values).squaredNorm() / static_cast<double>(y.rows()));
  }

  template <class T>
  static T value_and_gradient(ConstMatrixView<T> y, const Targets<T>& t, MatrixView<T> grad, T scale) {
    check(y, t);
    grad = (y - t.values) * (T(2) * scale / static_cast<T>(y.rows()));
    return static_cast<T>((y - t.values).squaredNorm() / static_cast<double>(y.rows()));
  }

 private:
  template <class T>
  static void check(ConstMatrixView<T> y, const Targets<T>& t) {
    if (y.rows() != t.values.rows() || y.cols() != t.values.cols())
      throw ShapeError("MSE: output is " + std::to_string(y.rows()) + "x" + std::to_string(y.cols()) +
                       " but targets are " + std::to_string(t.values.rows()) + "x" +
                       std::to_string(t.values.cols()));
  }
};

}  // namespace flotilla
