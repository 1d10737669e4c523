// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TESTING_GRADIENTCHECK_HPP_INCLUDED
#define FLOTILLA_TESTING_GRADIENTCHECK_HPP_INCLUDED
// Finite-difference checks of layers and losses, for flotilla's tests and for users' own layers:
//
//   auto r = flotilla::testing::check_layer<MyLayer, flotilla::Shape<3, 8, 8>>();
//   CHECK(r.passed());   // or print r.report()
//
// A layer is checked on the scalar loss L = sum(R .* layer(x)) for a random R: the analytic
// gradients from backward(), with output_grad = R, are compared with central differences
// (L(v + h) - L(v - h)) / 2h of every parameter and every input value. The error of a tensor is
// |analytic - numeric| / max(|analytic|, |numeric|) in the Euclidean norm, which stays meaningful
// when single entries are near zero. Run it in double.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iomanip>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "flotilla/concepts/layer.hpp"
#include "flotilla/concepts/loss.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/core/layer_args.hpp"

namespace flotilla::testing {

/// One compared tensor (a parameter tensor, the input, or a loss's output gradient).
struct TensorCheck {
  std::string name;
  double relative_error = 0;
  double max_abs_error = 0;
};

struct GradientCheckResult {
  std::vector<TensorCheck> tensors;
  double tolerance = 1e-6;

  double max_relative_error() const {
    double m = 0;
    for (const auto& t : tensors) m = std::max(m, t.relative_error);
    return m;
  }
  bool passed() const { return max_relative_error() < tolerance; }
  std::string report() const {
    std::ostringstream s;
    s << std::scientific << std::setprecision(2);
    for (const auto& t : tensors)
      s << t.name << ": relative error " << t.relative_error << ", max abs error " << t.max_abs_error
        << (t.relative_error < tolerance ? "" : "  <-- above tolerance") << "\n";
    return s.str();
  }
};

struct GradientCheckOptions {
  std::size_t batch = 3;
  std::uint64_t seed = 1;
  double step = 1e-6;       ///< h of the central difference
  double tolerance = 1e-6;  ///< bound on each tensor's relative error
  Mode mode = Mode::train;
};

namespace detail {
inline TensorCheck compare(std::string name, std::span<const double> analytic, std::span<const double> numeric) {
  double diff = 0, na = 0, nn = 0, max_abs = 0;
  for (std::size_t i = 0; i < analytic.size(); ++i) {
    const double d = analytic[i] - numeric[i];
    diff += d * d;
    na += analytic[i] * analytic[i];
    nn += numeric[i] * numeric[i];
    max_abs = std::max(max_abs, std::abs(d));
  }
  const double denom = std::max(std::sqrt(std::max(na, nn)), 1e-300);
  return {std::move(name), diff == 0 ? 0.0 : std::sqrt(diff) / denom, max_abs};
}
}  // namespace detail

/// Checks the gradients of the layer that `Spec` binds to for input shape `In`, in scalar type T.
template <class Spec, class In, class T = double>
GradientCheckResult check_layer(const GradientCheckOptions& o = {}) {
  static_assert(flotilla::detail::check_layer_spec<Spec, In, T>());
  using L = typename Spec::template layer<In, T>;
  constexpr auto in_size = static_cast<Eigen::Index>(In::size);
  constexpr auto out_size = static_cast<Eigen::Index>(L::output_shape::size);
  const auto batch = static_cast<Eigen::Index>(o.batch);

  Generator g(o.seed);
  L layer{};
  Matrix<T> x(in_size, batch), r(out_size, batch), y(out_size, batch), dx(in_size, batch);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = g.normal<T>();
  for (Eigen::Index i = 0; i < r.size(); ++i) r.data()[i] = g.normal<T>();
  std::vector<T> params(L::parameter_count), grads(L::parameter_count, T(0));
  if constexpr (L::parameter_count > 0) {
    Generator init = g.fork(1);
    layer.initialize(std::span<T>(params), init);
    // Non-zero biases too, so that their effect on the output is exercised.
    for (auto& p : params) p += static_cast<T>(0.1) * g.normal<T>();
  }
  std::vector<std::uint64_t> ids(o.batch);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = 1000 + i;
  const std::uint64_t key = g();

  auto loss_at = [&](const Matrix<T>& input, const std::vector<T>& p) {
    Matrix<T> out(out_size, batch);
    L fresh = layer;
    fresh.forward(ForwardArgs<T>{ConstMatrixView<T>(input.data(), in_size, batch), MatrixView<T>(out.data(), out_size, batch),
                                 std::span<const T>(p), o.mode, ids, key});
    return static_cast<double>((out.array() * r.array()).sum());
  };

  layer.forward(ForwardArgs<T>{ConstMatrixView<T>(x.data(), in_size, batch), MatrixView<T>(y.data(), out_size, batch),
                               std::span<const T>(params), o.mode, ids, key});
  [[maybe_unused]] const L after_forward = layer;  // for the streaming backward, below
  // Backward's arguments, with output_grad = R, writing into `into` and `d`.
  auto backward_args = [&](std::vector<T>& into, Matrix<T>& d) {
    return BackwardArgs<T>{ConstMatrixView<T>(x.data(), in_size, batch), ConstMatrixView<T>(y.data(), out_size, batch),
                           ConstMatrixView<T>(r.data(), out_size, batch), MatrixView<T>(d.data(), in_size, batch),
                           std::span<const T>(params), std::span<T>(into)};
  };
  layer.backward(backward_args(grads, dx));

  GradientCheckResult result;
  result.tolerance = o.tolerance;
  const T h = static_cast<T>(o.step);
  if constexpr (L::parameter_count > 0) {
    std::size_t offset = 0;
    for (const auto& t : L::tensors) {
      if (t.role == TensorRole::state) {
        // Not trained: its gradient slots carry the state's increments (core/layer_args.hpp).
        offset += t.size;
        continue;
      }
      std::vector<double> analytic(t.size), numeric(t.size);
      for (std::size_t i = 0; i < t.size; ++i) {
        auto p = params;
        p[offset + i] = params[offset + i] + h;
        const double up = loss_at(x, p);
        p[offset + i] = params[offset + i] - h;
        const double down = loss_at(x, p);
        numeric[i] = (up - down) / (2 * static_cast<double>(h));
        analytic[i] = static_cast<double>(grads[offset + i]);
      }
      result.tensors.push_back(detail::compare(std::string(L::name) + "." + std::string(t.name), analytic, numeric));
      offset += t.size;
    }
  }
  std::vector<double> analytic(static_cast<std::size_t>(x.size())), numeric(analytic.size());
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    Matrix<T> xp = x;
    xp.data()[i] = x.data()[i] + h;
    const double up = loss_at(xp, params);
    xp.data()[i] = x.data()[i] - h;
    const double down = loss_at(xp, params);
    numeric[static_cast<std::size_t>(i)] = (up - down) / (2 * static_cast<double>(h));
    analytic[static_cast<std::size_t>(i)] = static_cast<double>(dx.data()[i]);
  }
  result.tensors.push_back(detail::compare(std::string(L::name) + ".input", analytic, numeric));

  if constexpr (L::parameter_count > 0 && StreamsGradients<L>) {
    // The streaming backward must give backward()'s gradients, and never change what it has
    // already reported final.
    L streaming = after_forward;
    std::vector<T> sgrads(L::parameter_count, T(0));
    Matrix<T> sdx(in_size, batch);
    std::vector<std::pair<std::size_t, std::vector<T>>> reports;
    auto record = [&](std::size_t offset) {
      const std::size_t from = std::min(offset, sgrads.size());
      reports.emplace_back(offset, std::vector<T>(sgrads.begin() + static_cast<std::ptrdiff_t>(from), sgrads.end()));
    };
    streaming.backward(backward_args(sgrads, sdx), GradientProgress(record));
    auto as_double = [](const auto& v) { return std::vector<double>(v.begin(), v.end()); };
    const auto streamed = as_double(sgrads), plain = as_double(grads);
    result.tensors.push_back(detail::compare(std::string(L::name) + ".params, streamed backward against backward", streamed, plain));
    const std::vector<double> sdx_values(sdx.data(), sdx.data() + sdx.size()), dx_values(dx.data(), dx.data() + dx.size());
    result.tensors.push_back(detail::compare(std::string(L::name) + ".input, streamed backward against backward", sdx_values, dx_values));
    std::size_t bad = 0;  // reports out of range, not decreasing, or changed afterwards
    for (std::size_t i = 0; i < reports.size(); ++i) {
      const auto& [offset, tail] = reports[i];
      const bool changed = offset > sgrads.size() || !std::equal(tail.begin(), tail.end(), sgrads.end() - static_cast<std::ptrdiff_t>(tail.size()));
      if (changed || (i > 0 && offset >= reports[i - 1].first)) ++bad;
    }
    result.tensors.push_back({std::string(L::name) + ": streamed reports that were out of range, not decreasing, or changed later (" +
                                  std::to_string(bad) + " of " + std::to_string(reports.size()) + ")",
                              bad == 0 ? 0.0 : 1.0, static_cast<double>(bad)});
  }
  return result;
}

/// Checks a loss's gradient with respect to the network output, on random outputs and targets.
/// `outputs` is the number of outputs per sample (classes, for a classification loss).
template <class LossT, class T = double>
GradientCheckResult check_loss(std::size_t outputs = 5, const GradientCheckOptions& o = {}) {
  static_assert(Loss<LossT, T>, "check_loss: the type is not a Loss (see docs/concepts/loss.md)");
  const auto rows = static_cast<Eigen::Index>(outputs);
  const auto batch = static_cast<Eigen::Index>(o.batch);
  Generator g(o.seed);
  Matrix<T> z(rows, batch), values(rows, batch), grad(rows, batch);
  for (Eigen::Index i = 0; i < z.size(); ++i) z.data()[i] = static_cast<T>(3) * g.normal<T>();
  for (Eigen::Index i = 0; i < values.size(); ++i) values.data()[i] = g.normal<T>();
  std::vector<std::int32_t> labels(o.batch);
  for (auto& l : labels) l = static_cast<std::int32_t>(g.below(outputs));
  Targets<T> t{labels, ConstMatrixView<T>(values.data(), rows, batch)};
  const T scale = T(1) / static_cast<T>(batch);
  LossT::value_and_gradient(ConstMatrixView<T>(z.data(), rows, batch), t, MatrixView<T>(grad.data(), rows, batch), scale);
  std::vector<double> analytic(static_cast<std::size_t>(z.size())), numeric(analytic.size());
  const T h = static_cast<T>(o.step);
  for (Eigen::Index i = 0; i < z.size(); ++i) {
    Matrix<T> zp = z;
    zp.data()[i] = z.data()[i] + h;
    const double up = static_cast<double>(LossT::value(ConstMatrixView<T>(zp.data(), rows, batch), t));
    zp.data()[i] = z.data()[i] - h;
    const double down = static_cast<double>(LossT::value(ConstMatrixView<T>(zp.data(), rows, batch), t));
    numeric[static_cast<std::size_t>(i)] = static_cast<double>(scale) * (up - down) / (2 * static_cast<double>(h));
    analytic[static_cast<std::size_t>(i)] = static_cast<double>(grad.data()[i]);
  }
  GradientCheckResult result;
  result.tolerance = o.tolerance;
  result.tensors.push_back(detail::compare(std::string(LossT::name) + ".output", analytic, numeric));
  return result;
}

}  // namespace flotilla::testing
#endif  // FLOTILLA_TESTING_GRADIENTCHECK_HPP_INCLUDED
