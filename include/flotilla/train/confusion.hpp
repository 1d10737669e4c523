// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_CONFUSION_HPP_INCLUDED
#define FLOTILLA_TRAIN_CONFUSION_HPP_INCLUDED
// A confusion matrix over a fixed set of classes, mergeable across workers: each worker counts its
// own shard of the validation set and the counts are summed, so the result does not depend on how
// the data was split.
#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/core/linkage.hpp"

namespace flotilla {

namespace detail {
/// Display width of UTF-8 text, counted in code points so that names such as "Straße" line up.
inline std::size_t report_display_width(std::string_view s) noexcept {
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

FLOTILLA_DECL void report_pad_left(std::string& out, std::string_view s, std::size_t width);

FLOTILLA_DECL void report_pad_right(std::string& out, std::string_view s, std::size_t width);

FLOTILLA_DECL std::string report_fixed4(double v);
}  // namespace detail

/// Counts of (actual, predicted) class pairs.
///
/// Conventions for classes without data, chosen so that no value is ever NaN:
/// - precision(c) is 0 when class c was never predicted (no true or false positives);
/// - recall(c) is 0 when class c never occurs (no true positives or false negatives);
/// - f1(c) is 0 when precision and recall are both 0;
/// - accuracy() is 0 when nothing has been counted.
/// report() prints "n/a" for such undefined values instead, so a reader can tell them from a real 0.
class ConfusionMatrix {
 public:
  /// `classes` must be at least 1.
  explicit ConfusionMatrix(std::size_t classes) : classes_(classes) {
    if (classes == 0) throw ConfigError("ConfusionMatrix: needs at least one class");
    counts_.assign(classes * classes, 0);
  }

  std::size_t classes() const noexcept { return classes_; }

  /// Counts `n` samples of class `actual` that were predicted as `predicted`.
  FLOTILLA_DECL void add(std::size_t predicted, std::size_t actual, std::uint64_t n = 1);

  /// Adds another worker's counts. Both must have the same number of classes.
  FLOTILLA_DECL void add(const ConfusionMatrix& other);

  /// Sets every count to zero (the start of a new validation pass).
  void clear() noexcept { std::fill(counts_.begin(), counts_.end(), 0); }

  /// Samples of class `actual` predicted as `predicted`.
  FLOTILLA_DECL std::uint64_t count(std::size_t actual, std::size_t predicted) const;

  /// Every count, row-major with one row per actual class: what an all-reduce sums.
  std::span<const std::uint64_t> counts() const noexcept { return counts_; }
  std::span<std::uint64_t> counts() noexcept { return counts_; }

  FLOTILLA_DECL std::uint64_t total() const noexcept;

  FLOTILLA_DECL std::uint64_t correct() const noexcept;

  /// Samples whose actual class is `c` (the row sum; "support").
  FLOTILLA_DECL std::uint64_t actual_count(std::size_t c) const;

  /// Samples predicted as `c` (the column sum).
  FLOTILLA_DECL std::uint64_t predicted_count(std::size_t c) const;

  /// Fraction of samples predicted correctly; 0 when empty.
  double accuracy() const noexcept { return ratio(correct(), total()); }

  /// Of the samples predicted as `c`, the fraction that are `c`; 0 when `c` was never predicted.
  double precision(std::size_t c) const { return ratio(count(c, c), predicted_count(c)); }

  /// Of the samples of class `c`, the fraction predicted as `c`; 0 when `c` never occurs.
  double recall(std::size_t c) const { return ratio(count(c, c), actual_count(c)); }

  /// Harmonic mean of precision and recall; 0 when both are 0.
  double f1(std::size_t c) const {
    const double p = precision(c), r = recall(c);
    return p + r > 0 ? 2 * p * r / (p + r) : 0.0;
  }

  /// Unweighted mean of f1 over the classes.
  FLOTILLA_DECL double macro_f1() const;

  /// An aligned text table of per-class precision, recall, f1 and support, then the matrix itself
  /// (rows: actual, columns: predicted). `class_names`, when given, must name every class.
  FLOTILLA_DECL std::string report(std::span<const std::string_view> class_names = {}) const;

 private:
  static double ratio(std::uint64_t num, std::uint64_t den) noexcept {
    return den == 0 ? 0.0 : static_cast<double>(num) / static_cast<double>(den);
  }

  FLOTILLA_DECL void check_class(std::size_t c, const char* what) const;

  std::size_t classes_;
  std::vector<std::uint64_t> counts_;
};

#if FLOTILLA_IMPLEMENTATION
namespace detail {

FLOTILLA_DECL void report_pad_left(std::string& out, std::string_view s, std::size_t width) {
  const std::size_t w = report_display_width(s);
  if (w < width) out.append(width - w, ' ');
  out.append(s);
}

FLOTILLA_DECL void report_pad_right(std::string& out, std::string_view s, std::size_t width) {
  const std::size_t w = report_display_width(s);
  out.append(s);
  if (w < width) out.append(width - w, ' ');
}

FLOTILLA_DECL std::string report_fixed4(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, 4);
  return std::string(buf, r.ptr);
}

}  // namespace detail

FLOTILLA_DECL void ConfusionMatrix::add(std::size_t predicted, std::size_t actual, std::uint64_t n) {
  check_class(predicted, "predicted");
  check_class(actual, "actual");
  counts_[actual * classes_ + predicted] += n;
}

FLOTILLA_DECL void ConfusionMatrix::add(const ConfusionMatrix& other) {
  if (other.classes_ != classes_) {
    throw ConfigError("ConfusionMatrix::add: cannot merge a matrix of " + std::to_string(other.classes_) +
                      " classes into one of " + std::to_string(classes_));
  }
  for (std::size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
}

FLOTILLA_DECL std::uint64_t ConfusionMatrix::count(std::size_t actual, std::size_t predicted) const {
  check_class(actual, "actual");
  check_class(predicted, "predicted");
  return counts_[actual * classes_ + predicted];
}

FLOTILLA_DECL std::uint64_t ConfusionMatrix::total() const noexcept {
  std::uint64_t t = 0;
  for (const auto c : counts_) t += c;
  return t;
}

FLOTILLA_DECL std::uint64_t ConfusionMatrix::correct() const noexcept {
  std::uint64_t t = 0;
  for (std::size_t c = 0; c < classes_; ++c) t += counts_[c * classes_ + c];
  return t;
}

FLOTILLA_DECL std::uint64_t ConfusionMatrix::actual_count(std::size_t c) const {
  check_class(c, "class");
  std::uint64_t t = 0;
  for (std::size_t p = 0; p < classes_; ++p) t += counts_[c * classes_ + p];
  return t;
}

FLOTILLA_DECL std::uint64_t ConfusionMatrix::predicted_count(std::size_t c) const {
  check_class(c, "class");
  std::uint64_t t = 0;
  for (std::size_t a = 0; a < classes_; ++a) t += counts_[a * classes_ + c];
  return t;
}

FLOTILLA_DECL double ConfusionMatrix::macro_f1() const {
  double s = 0;
  for (std::size_t c = 0; c < classes_; ++c) s += f1(c);
  return s / static_cast<double>(classes_);
}

FLOTILLA_DECL std::string ConfusionMatrix::report(std::span<const std::string_view> class_names) const {
  if (!class_names.empty() && class_names.size() != classes_) {
    throw ConfigError("ConfusionMatrix::report: " + std::to_string(class_names.size()) + " class names for " +
                      std::to_string(classes_) + " classes");
  }
  std::vector<std::string> labels(classes_);
  for (std::size_t c = 0; c < classes_; ++c) {
    labels[c] = std::to_string(c);
    if (!class_names.empty()) labels[c] += " " + std::string(class_names[c]);
  }
  std::size_t label_w = detail::report_display_width("accuracy");
  for (const auto& l : labels) label_w = std::max(label_w, detail::report_display_width(l));

  std::string out;
  const std::size_t num_w = 9;  // "precision" and "0.1234" both fit
  std::size_t support_w = std::max<std::size_t>(7, std::to_string(total()).size());
  detail::report_pad_right(out, "class", label_w);
  for (std::string_view h : {"precision", "recall", "f1"}) {
    out += "  ";
    detail::report_pad_left(out, h, num_w);
  }
  out += "  ";
  detail::report_pad_left(out, "support", support_w);
  out += '\n';
  for (std::size_t c = 0; c < classes_; ++c) {
    const bool predicted = predicted_count(c) > 0, present = actual_count(c) > 0;
    detail::report_pad_right(out, labels[c], label_w);
    out += "  ";
    detail::report_pad_left(out, predicted ? detail::report_fixed4(precision(c)) : "n/a", num_w);
    out += "  ";
    detail::report_pad_left(out, present ? detail::report_fixed4(recall(c)) : "n/a", num_w);
    out += "  ";
    detail::report_pad_left(out, predicted || present ? detail::report_fixed4(f1(c)) : "n/a", num_w);
    out += "  ";
    detail::report_pad_left(out, std::to_string(actual_count(c)), support_w);
    out += '\n';
  }
  detail::report_pad_right(out, "accuracy", label_w);
  out.append(2 * (num_w + 2), ' ');
  out += "  ";
  detail::report_pad_left(out, total() > 0 ? detail::report_fixed4(accuracy()) : "n/a", num_w);
  out += "  ";
  detail::report_pad_left(out, std::to_string(total()), support_w);
  out += "\n\nconfusion matrix (rows: actual, columns: predicted)\n";

  // Columns are headed by class number only, so ten long names do not make a 150-column table.
  std::size_t cell_w = std::to_string(classes_ - 1).size();
  for (const auto v : counts_) cell_w = std::max(cell_w, std::to_string(v).size());
  out.append(label_w, ' ');
  for (std::size_t p = 0; p < classes_; ++p) {
    out += "  ";
    detail::report_pad_left(out, std::to_string(p), cell_w);
  }
  out += '\n';
  for (std::size_t a = 0; a < classes_; ++a) {
    detail::report_pad_right(out, labels[a], label_w);
    for (std::size_t p = 0; p < classes_; ++p) {
      out += "  ";
      detail::report_pad_left(out, std::to_string(counts_[a * classes_ + p]), cell_w);
    }
    out += '\n';
  }
  return out;
}

FLOTILLA_DECL void ConfusionMatrix::check_class(std::size_t c, const char* what) const {
  if (c >= classes_) {
    throw ConfigError("ConfusionMatrix: " + std::string(what) + " class " + std::to_string(c) +
                      " is out of range (the matrix has " + std::to_string(classes_) + " classes)");
  }
}
#endif  // FLOTILLA_IMPLEMENTATION

}  // namespace flotilla
#endif  // FLOTILLA_TRAIN_CONFUSION_HPP_INCLUDED
