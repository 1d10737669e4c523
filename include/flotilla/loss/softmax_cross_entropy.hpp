#pragma once
// Softmax followed by cross-entropy, fused: the gradient is softmax(z) - onehot(label), computed
// from logits shifted by their maximum so that exp() never overflows, and the loss is
// logsumexp(z) - z[label], which stays finite for any finite logits.
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "flotilla/core/error.hpp"
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
    return run(logits, t, &grad, scale);
  }

 private:
  template <class T>
  static T run(ConstMatrixView<T> logits, const Targets<T>& t, MatrixView<T>* grad, T scale) {
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
      const auto z = logits.col(s);
      const T m = z.maxCoeff();
      T sum = 0;
      if (grad) {
        // exp(z - m) is computed once: kept in the gradient column, then normalised.
        auto g = grad->col(s);
        for (Eigen::Index j = 0; j < classes; ++j) sum += (g(j) = std::exp(z(j) - m));
        g *= scale / sum;
        g(label) -= scale;
      } else {
        for (Eigen::Index j = 0; j < classes; ++j) sum += std::exp(z(j) - m);
      }
      total += static_cast<double>(std::log(sum) + m - z(label));
    }
    return static_cast<T>(total);
  }
};

}  // namespace flotilla
