// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_DATA_CTRGENERATOR_HPP_INCLUDED
#define FLOTILLA_DATA_CTRGENERATOR_HPP_INCLUDED
// Synthetic click logs in the Criteo format, labelled by a known ("planted") logistic model, so
// that a sparse model's quality can be judged against the best any model can do on the same data:
// the planted model's own AUC and log loss.
//
// Every line is drawn from its own generator, seeded by (seed, stream, line index): a file is the
// same bytes however it is chunked, a line can be regenerated alone, and a held-out file is simply
// another stream of the same planted model (CtrGeneratorOptions::held_out).
//
// The planted model stores no table: the weight of an ID is a hash of (seed, field, ID), so it is
// defined for every 32-bit ID of every field, and evaluates a CtrExample exactly as a reader
// produces it (dense features already log1p-transformed, IDs the values the hex tokens spell).
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/data/ctr_example.hpp"

namespace flotilla::data {

/// Default vocabulary sizes: 26 fields spread geometrically from 10 to 1,000,000 IDs.
inline std::vector<std::uint64_t> default_ctr_vocabulary() {
  std::vector<std::uint64_t> v(criteo_categorical_fields);
  for (std::size_t f = 0; f < v.size(); ++f)
    v[f] = static_cast<std::uint64_t>(std::llround(10.0 * std::pow(1e5, static_cast<double>(f) / 25.0)));
  return v;
}

/// Default share of lines in which each categorical field is empty (shaped after Criteo's: most
/// fields always present, a few often missing).
inline std::vector<double> default_ctr_missing_rate() {
  return {0.0, 0.0, 0.03, 0.03, 0.0, 0.12, 0.0, 0.0, 0.0,  0.0,  0.0, 0.03, 0.0,
          0.0, 0.0, 0.03, 0.0, 0.0, 0.44, 0.44, 0.03, 0.76, 0.0, 0.03, 0.44, 0.44};
}

/// Per dense feature: share of lines where it is empty.
inline std::vector<double> default_ctr_dense_missing_rate() {
  return {0.45, 0.0, 0.2, 0.2, 0.03, 0.22, 0.04, 0.0, 0.04, 0.45, 0.04, 0.76, 0.2};
}

/// Per dense feature: the scale of its heavy-tailed count distribution (see CtrGeneratorOptions).
inline std::vector<double> default_ctr_dense_scale() {
  return {2.0, 50.0, 10.0, 5.0, 5000.0, 50.0, 10.0, 20.0, 50.0, 0.5, 2.0, 0.5, 5.0};
}

/// Per dense feature: the tail index of its count distribution (smaller: heavier tail).
inline std::vector<double> default_ctr_dense_tail() {
  return {1.5, 1.2, 2.0, 2.5, 1.3, 1.5, 2.0, 3.0, 1.5, 2.0, 1.8, 2.0, 2.5};
}

/// What a generated click log looks like, and the planted model that labels it.
///
/// Line i of stream s (i counted from 0 within the stream) is drawn as follows:
/// - dense feature j is empty with probability dense_missing_rate[j]; otherwise it is the count
///   floor(dense_scale[j] * (U^(-1/dense_tail[j]) - 1)), U uniform in (0, 1] (a discrete Lomax:
///   non-negative, heavy-tailed), capped at 2^31 - 1;
/// - categorical field f is empty with probability missing_rate[f]; otherwise a rank k in
///   [1, vocabulary[f]] is drawn with probability proportional to k^-zipf, and written as the
///   8 hex digits of a 32-bit hash of (seed, f, k), so that IDs look random;
/// - the label is 1 with probability sigmoid(logit), logit from PlantedCtrModel.
struct CtrGeneratorOptions {
  std::uint64_t seed = 1;
  std::uint64_t lines = 1'000'000;
  /// Index of the first line written: a file holds lines [first_line, first_line + lines).
  std::uint64_t first_line = 0;
  /// Which stream of lines: 0 for training, any other value for a held-out set. The planted model
  /// does not depend on it.
  std::uint64_t stream = 0;
  std::vector<std::uint64_t> vocabulary = default_ctr_vocabulary();  // 26 entries, each >= 1
  double zipf = 1.1;                                                 // exponent, in (0, 10]
  std::vector<double> missing_rate = default_ctr_missing_rate();    // 26 entries in [0, 1]
  std::vector<double> dense_missing_rate = default_ctr_dense_missing_rate();  // 13 entries in [0, 1]
  std::vector<double> dense_scale = default_ctr_dense_scale();      // 13 entries, > 0
  std::vector<double> dense_tail = default_ctr_dense_tail();        // 13 entries, > 0
  /// Standard deviation of an ID's weight w(field, id).
  double categorical_weight_scale = 0.25;
  /// Standard deviation of a dense feature's weight v_j.
  double dense_weight_scale = 0.15;
  /// The share of clicks the bias is set for (in (0, 1)); ignored when `bias` is given.
  double click_rate = 0.25;
  std::optional<double> bias;
  /// Threads that format lines while writing (at least 1); the bytes written do not depend on it.
  unsigned threads = 1;

  /// The same planted model and distribution, another stream: a held-out file of `count` lines.
  CtrGeneratorOptions held_out(std::uint64_t count, std::uint64_t held_out_stream = 1) const {
    CtrGeneratorOptions o = *this;
    o.lines = count;
    o.first_line = 0;
    o.stream = held_out_stream;
    return o;
  }

  /// Throws ConfigError naming the first option that cannot work.
  void validate() const {
    auto show = [](double v) {
      std::ostringstream os;
      os << v;
      return os.str();
    };
    auto fail = [](const std::string& what) { return ConfigError("CtrGeneratorOptions: " + what); };
    auto check_size = [&](const auto& v, std::size_t n, const char* name) {
      if (v.size() != n)
        throw fail(std::string(name) + " has " + std::to_string(v.size()) + " entries, the Criteo format needs " +
                   std::to_string(n));
    };
    check_size(vocabulary, criteo_categorical_fields, "vocabulary");
    check_size(missing_rate, criteo_categorical_fields, "missing_rate");
    check_size(dense_missing_rate, criteo_dense_features, "dense_missing_rate");
    check_size(dense_scale, criteo_dense_features, "dense_scale");
    check_size(dense_tail, criteo_dense_features, "dense_tail");
    for (std::size_t f = 0; f < vocabulary.size(); ++f)
      if (vocabulary[f] == 0 || vocabulary[f] > (std::uint64_t{1} << 40))
        throw fail("vocabulary[" + std::to_string(f) + "] is " + std::to_string(vocabulary[f]) + ", must be in [1, 2^40]");
    auto check_rates = [&](const std::vector<double>& v, const char* name) {
      for (std::size_t i = 0; i < v.size(); ++i)
        if (!(v[i] >= 0.0 && v[i] <= 1.0))
          throw fail(std::string(name) + "[" + std::to_string(i) + "] is " + show(v[i]) + ", must be in [0, 1]");
    };
    check_rates(missing_rate, "missing_rate");
    check_rates(dense_missing_rate, "dense_missing_rate");
    auto check_positive = [&](const std::vector<double>& v, const char* name) {
      for (std::size_t i = 0; i < v.size(); ++i)
        if (!(v[i] > 0.0 && std::isfinite(v[i])))
          throw fail(std::string(name) + "[" + std::to_string(i) + "] is " + show(v[i]) + ", must be finite and > 0");
    };
    check_positive(dense_scale, "dense_scale");
    check_positive(dense_tail, "dense_tail");
    if (!(zipf > 0.0 && zipf <= 10.0)) throw fail("zipf is " + show(zipf) + ", must be in (0, 10]");
    if (!(categorical_weight_scale >= 0.0 && std::isfinite(categorical_weight_scale)))
      throw fail("categorical_weight_scale is " + show(categorical_weight_scale) + ", must be finite and >= 0");
    if (!(dense_weight_scale >= 0.0 && std::isfinite(dense_weight_scale)))
      throw fail("dense_weight_scale is " + show(dense_weight_scale) + ", must be finite and >= 0");
    if (bias) {
      if (!std::isfinite(*bias)) throw fail("bias is not a finite number");
    } else if (!(click_rate > 0.0 && click_rate < 1.0)) {
      throw fail("click_rate is " + show(click_rate) + ", must be in (0, 1)");
    }
    if (first_line > (std::uint64_t{1} << 62) || lines > (std::uint64_t{1} << 62))
      throw fail("first_line and lines must each be at most 2^62");
  }
};

namespace detail {

inline constexpr std::uint64_t ctr_weight_salt = 0x77e1'9b7a'c3d2'0001ULL;
inline constexpr std::uint64_t ctr_id_salt = 0x1d5a'4c4e'8f60'0002ULL;
inline constexpr std::uint64_t ctr_line_salt = 0x6c1e'5eed'0b3f'0003ULL;
inline constexpr std::uint64_t ctr_dense_salt = 0x0de5'e0a1'2c77'0004ULL;
/// The stream the bias is calibrated on: the model must not depend on which stream is written.
inline constexpr std::uint64_t ctr_calibration_stream = 0xca1b'ca1b'ca1b'ca1bULL;
inline constexpr std::size_t ctr_calibration_lines = 20000;

/// An approximately standard normal value from 64 hashed bits: the sum of four 16-bit uniforms,
/// centred and scaled to variance 1 (Irwin-Hall). Much cheaper than Box-Muller, and the exact
/// shape of a weight's distribution does not matter here.
inline double ctr_hashed_normal(std::uint64_t bits) noexcept {
  const std::uint64_t sum = (bits & 0xffffU) + ((bits >> 16) & 0xffffU) + ((bits >> 32) & 0xffffU) + (bits >> 48);
  // Each 16-bit value is uniform on {0..65535}: mean 32767.5, variance (65536^2 - 1) / 12.
  constexpr double mean = 4 * 32767.5;
  constexpr double inverse_sd = 1.0 / 37837.227237206;  // 1 / sqrt(4 * (65536^2 - 1) / 12)
  return (static_cast<double>(sum) - mean) * inverse_sd;
}

/// Zipf sampling over [1, n]: for small vocabularies an alias table (Walker; Vose's construction),
/// one random word and no logarithm per draw; beyond alias_limit IDs rejection-inversion
/// (Hörmann and Derflinger, 1996), constant expected time and no table whatever the size.
class ZipfSampler {
 public:
  static constexpr std::uint64_t alias_limit = 4096;

  ZipfSampler(std::uint64_t n, double exponent) : n_(static_cast<double>(n)), a_(exponent) {
    h_integral_x1_ = h_integral(1.5) - 1.0;
    h_integral_n_ = h_integral(n_ + 0.5);
    s_ = 2.0 - h_integral_inverse(h_integral(2.5) - h(2.0));
    if (n <= alias_limit) build_alias(static_cast<std::size_t>(n));
  }

  std::uint64_t operator()(Generator& g) const noexcept {
    if (!alias_.empty()) {
      // High 32 bits pick a column (multiply-shift), low 32 bits decide between it and its alias.
      const std::uint64_t bits = g();
      const std::size_t column = static_cast<std::size_t>(((bits >> 32) * alias_.size()) >> 32);
      const auto& c = alias_[column];
      return (static_cast<std::uint32_t>(bits) < c.keep ? column : c.alias) + 1;
    }
    return rejection_inversion(g);
  }

 private:
  struct Column {
    std::uint32_t keep;   // keep this column when the low 32 bits are below it
    std::uint32_t alias;  // else this one (0-based rank)
  };

  void build_alias(std::size_t n) {
    std::vector<double> scaled(n);
    double total = 0;
    for (std::size_t k = 0; k < n; ++k) total += scaled[k] = std::pow(static_cast<double>(k + 1), -a_);
    for (auto& v : scaled) v *= static_cast<double>(n) / total;
    alias_.assign(n, Column{0xffffffffU, 0});
    std::vector<std::uint32_t> small, large;
    for (std::size_t k = 0; k < n; ++k) (scaled[k] < 1.0 ? small : large).push_back(static_cast<std::uint32_t>(k));
    while (!small.empty() && !large.empty()) {
      const std::uint32_t s = small.back(), l = large.back();
      small.pop_back();
      alias_[s] = Column{static_cast<std::uint32_t>(std::min(scaled[s] * 4294967296.0, 4294967295.0)), l};
      scaled[l] -= 1.0 - scaled[s];
      if (scaled[l] < 1.0) {
        large.pop_back();
        small.push_back(l);
      }
    }
    // What remains holds probability 1 up to rounding: always kept.
    for (auto k : small) alias_[k] = Column{0xffffffffU, k};
    for (auto k : large) alias_[k] = Column{0xffffffffU, k};
  }

  std::uint64_t rejection_inversion(Generator& g) const noexcept {
    for (;;) {
      const double u = h_integral_n_ + g.uniform<double>() * (h_integral_x1_ - h_integral_n_);
      const double x = h_integral_inverse(u);
      double k = std::floor(x + 0.5);
      if (k < 1.0) k = 1.0;
      if (k > n_) k = n_;
      if (k - x <= s_ || u >= h_integral(k + 0.5) - h(k)) return static_cast<std::uint64_t>(k);
    }
  }

 private:
  static double helper1(double x) noexcept {  // log1p(x) / x, stable near 0
    return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
  }
  static double helper2(double x) noexcept {  // expm1(x) / x, stable near 0
    return std::abs(x) > 1e-8 ? std::expm1(x) / x : 1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x));
  }
  double h(double x) const noexcept { return std::exp(-a_ * std::log(x)); }
  double h_integral(double x) const noexcept {
    const double log_x = std::log(x);
    return helper2((1.0 - a_) * log_x) * log_x;
  }
  double h_integral_inverse(double x) const noexcept {
    double t = x * (1.0 - a_);
    if (t < -1.0) t = -1.0;  // rounding can push it just past the pole
    return std::exp(helper1(t) * x);
  }

  double n_, a_;
  double h_integral_x1_ = 0, h_integral_n_ = 0, s_ = 0;
  std::vector<Column> alias_;
};

/// One drawn line before formatting: raw counts (-1: empty) and IDs.
struct CtrDraw {
  std::array<std::int64_t, criteo_dense_features> dense{};  // -1: empty
  std::array<std::uint32_t, criteo_categorical_fields> ids{};
  std::array<bool, criteo_categorical_fields> present{};
  double logit = 0;
  float label = 0;
};

/// The dense feature as a reader hands it to a model: log(1 + max(x, 0)), 0 when empty.
inline float ctr_dense_transform(std::int64_t x) noexcept {
  return x <= 0 ? 0.0f : static_cast<float>(std::log1p(static_cast<double>(x)));
}

/// The two lowercase hex digits of every byte, so that an ID is written four bytes at a time.
inline constexpr std::array<char, 512> ctr_hex_pairs = [] {
  std::array<char, 512> t{};
  constexpr char digits[] = "0123456789abcdef";
  for (std::size_t b = 0; b < 256; ++b) {
    t[2 * b] = digits[b >> 4];
    t[2 * b + 1] = digits[b & 15];
  }
  return t;
}();

}  // namespace detail

/// The logistic model that labels generated lines:
///
///   logit = bias + sum over fields f, IDs id of w(f, id) * value + sum_j v_j * dense_j
///
/// with w(f, id) = categorical_weight_scale * N(hash(seed, f, id)), v_j = dense_weight_scale *
/// N(hash(seed, j)) (N: an approximately standard normal value made from the hash), `value` the
/// ID's weight (1 when the example has none) and dense_j the transformed feature log(1 + max(x, 0)).
/// Unless CtrGeneratorOptions::bias is given, the bias is found by bisection so that the mean
/// probability over a fixed calibration sample of 20,000 lines is `click_rate`.
class PlantedCtrModel {
 public:
  explicit PlantedCtrModel(const CtrGeneratorOptions& o);

  double bias() const noexcept { return bias_; }
  /// Weight of ID `id` in categorical field `field` (defined for every ID).
  double field_weight(std::size_t field, std::uint64_t id) const noexcept {
    return categorical_scale_ * detail::ctr_hashed_normal(flotilla::detail::mix(field_keys_[field], id));
  }
  /// Weight of the transformed dense feature j.
  double dense_weight(std::size_t j) const noexcept { return dense_weights_[j]; }

  /// The logit of an example as a Criteo reader produces it. Throws ShapeError when it does not
  /// have 13 dense features and 26 fields.
  double logit(const CtrExample& e) const {
    if (e.dense.size() != criteo_dense_features || e.fields() != criteo_categorical_fields)
      throw ShapeError("PlantedCtrModel: example of line " + std::to_string(e.line) + " has " +
                       std::to_string(e.dense.size()) + " dense features and " + std::to_string(e.fields()) +
                       " fields, the model needs " + std::to_string(criteo_dense_features) + " and " +
                       std::to_string(criteo_categorical_fields));
    double z = bias_;
    for (std::size_t f = 0; f < criteo_categorical_fields; ++f) {
      const auto ids = e.field_ids(f);
      const auto values = e.field_values(f);
      for (std::size_t k = 0; k < ids.size(); ++k)
        z += field_weight(f, ids[k]) * (values.empty() ? 1.0 : static_cast<double>(values[k]));
    }
    for (std::size_t j = 0; j < criteo_dense_features; ++j) z += dense_weights_[j] * static_cast<double>(e.dense[j]);
    return z;
  }
  /// sigmoid(logit(e)): the probability that the example is a click.
  double probability(const CtrExample& e) const { return sigmoid(logit(e)); }

  static double sigmoid(double z) noexcept {
    return z >= 0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z));
  }

 private:
  friend class CtrGenerator;
  /// The logit of a drawn line before the bias, in the same order of summation as logit().
  double features_logit(const detail::CtrDraw& d) const noexcept {
    double z = 0;
    for (std::size_t f = 0; f < criteo_categorical_fields; ++f)
      if (d.present[f]) z += field_weight(f, d.ids[f]);
    for (std::size_t j = 0; j < criteo_dense_features; ++j)
      z += dense_weights_[j] * static_cast<double>(detail::ctr_dense_transform(d.dense[j]));
    return z;
  }

  double bias_ = 0;
  double categorical_scale_ = 0;
  std::array<std::uint64_t, criteo_categorical_fields> field_keys_{};
  std::array<double, criteo_dense_features> dense_weights_{};
};

/// Draws lines of one stream: as CtrExamples (what a reader would produce) or as Criteo text.
/// Const and stateless between lines, so one generator may serve several threads.
class CtrGenerator {
 public:
  explicit CtrGenerator(CtrGeneratorOptions o) : options_((o.validate(), std::move(o))), model_(options_) {
    for (std::size_t f = 0; f < criteo_categorical_fields; ++f) {
      zipf_.emplace_back(options_.vocabulary[f], options_.zipf);
      id_keys_[f] = flotilla::detail::mix(flotilla::detail::mix(options_.seed, detail::ctr_id_salt), f);
    }
    stream_key_ = flotilla::detail::mix(flotilla::detail::mix(options_.seed, detail::ctr_line_salt), options_.stream);
  }

  const CtrGeneratorOptions& options() const noexcept { return options_; }
  const PlantedCtrModel& model() const noexcept { return model_; }

  /// The 32-bit ID that rank k (1 most frequent) of field f is written as.
  std::uint32_t id_of_rank(std::size_t field, std::uint64_t rank) const noexcept {
    return static_cast<std::uint32_t>(flotilla::detail::mix(id_keys_[field], rank) >> 32);
  }

  /// Line `index` of this generator's stream (0-based, independent of first_line), as a Criteo
  /// reader with the default transform produces it; `line` is index - first_line + 1, its line
  /// number in the file that starts at first_line (0 for a line before that file).
  void example(std::uint64_t index, CtrExample& out) const {
    const detail::CtrDraw d = draw(index);
    out.label = d.label;
    out.dense.resize(criteo_dense_features);
    for (std::size_t j = 0; j < criteo_dense_features; ++j) out.dense[j] = detail::ctr_dense_transform(d.dense[j]);
    out.offsets.resize(criteo_categorical_fields + 1);
    out.ids.clear();
    out.values.clear();
    out.offsets[0] = 0;
    for (std::size_t f = 0; f < criteo_categorical_fields; ++f) {
      if (d.present[f]) out.ids.push_back(d.ids[f]);
      out.offsets[f + 1] = static_cast<std::uint32_t>(out.ids.size());
    }
    out.line = index >= options_.first_line ? index - options_.first_line + 1 : 0;
  }

  /// Appends line `index` of the stream, with its newline, to `out`.
  void append_line(std::uint64_t index, std::string& out) const {
    const detail::CtrDraw d = draw(index);
    char buf[16 + 13 * 12 + 26 * 9 + 4];
    char* p = buf;
    *p++ = d.label != 0 ? '1' : '0';
    for (std::size_t j = 0; j < criteo_dense_features; ++j) {
      *p++ = '\t';
      if (d.dense[j] >= 0) p = std::to_chars(p, buf + sizeof buf, d.dense[j]).ptr;
    }
    for (std::size_t f = 0; f < criteo_categorical_fields; ++f) {
      *p++ = '\t';
      if (!d.present[f]) continue;
      const std::uint32_t id = d.ids[f];
      for (int s = 24; s >= 0; s -= 8) {
        const char* pair = &detail::ctr_hex_pairs[2 * ((id >> s) & 0xffU)];
        *p++ = pair[0];
        *p++ = pair[1];
      }
    }
    *p++ = '\n';
    out.append(buf, static_cast<std::size_t>(p - buf));
  }

  /// Writes lines [first_line, first_line + lines) to `os`, a chunk at a time, with
  /// options().threads threads formatting chunks side by side (the bytes do not depend on how
  /// many). Throws DataError naming `name` when the stream fails.
  void write(std::ostream& os, const std::string& name = "<stream>") const {
    constexpr std::uint64_t chunk = 8192;
    const std::size_t threads = std::max<std::size_t>(1, options_.threads);
    std::vector<std::string> texts(threads);
    for (auto& t : texts) t.reserve(chunk * 256);
    std::uint64_t written = 0;
    const std::uint64_t end = options_.first_line + options_.lines;
    auto fill = [&](std::size_t t, std::uint64_t from) {
      texts[t].clear();
      const std::uint64_t stop = from >= end ? end : std::min(end, from + chunk);
      for (std::uint64_t i = from; i < stop; ++i) append_line(i, texts[t]);
    };
    for (std::uint64_t i = options_.first_line; i < end;) {
      const std::size_t used = static_cast<std::size_t>(std::min<std::uint64_t>(threads, (end - i + chunk - 1) / chunk));
      if (used == 1) {
        fill(0, i);
      } else {
        std::vector<std::exception_ptr> errors(used);
        std::vector<std::thread> pool;
        pool.reserve(used - 1);
        for (std::size_t t = 1; t < used; ++t)
          pool.emplace_back([&, t, from = i + t * chunk] {
            try {
              fill(t, from);
            } catch (...) {
              errors[t] = std::current_exception();
            }
          });
        try {
          fill(0, i);
        } catch (...) {
          errors[0] = std::current_exception();
        }
        for (auto& th : pool) th.join();
        for (const auto& e : errors)
          if (e) std::rethrow_exception(e);
      }
      for (std::size_t t = 0; t < used; ++t) {
        os.write(texts[t].data(), static_cast<std::streamsize>(texts[t].size()));
        if (!os) throw DataError(name, written, "cannot write the generated click log (disk full or stream closed?)");
        written += texts[t].size();
      }
      i = std::min(end, i + used * chunk);
    }
    os.flush();
    if (!os) throw DataError(name, written, "cannot write the generated click log (disk full or stream closed?)");
  }

 private:
  friend class PlantedCtrModel;
  /// Draws everything but the label; the bias is not needed for that.
  detail::CtrDraw draw_features(Generator& g) const {
    detail::CtrDraw d;
    for (std::size_t j = 0; j < criteo_dense_features; ++j) {
      const double miss = g.uniform<double>();
      const double u = 1.0 - g.uniform<double>();  // (0, 1]
      if (miss < options_.dense_missing_rate[j]) {
        d.dense[j] = -1;
        continue;
      }
      const double x = std::floor(options_.dense_scale[j] * (std::pow(u, -1.0 / options_.dense_tail[j]) - 1.0));
      d.dense[j] = x >= 2147483647.0 ? 2147483647 : static_cast<std::int64_t>(x);
    }
    for (std::size_t f = 0; f < criteo_categorical_fields; ++f) {
      d.present[f] = !(g.uniform<double>() < options_.missing_rate[f]);
      if (d.present[f]) d.ids[f] = id_of_rank(f, zipf_[f](g));
    }
    return d;
  }
  Generator line_generator(std::uint64_t key, std::uint64_t index) const noexcept {
    return Generator(flotilla::detail::mix(key, index));
  }
  detail::CtrDraw draw(std::uint64_t index) const {
    Generator g = line_generator(stream_key_, index);
    detail::CtrDraw d = draw_features(g);
    d.logit = model_.bias_ + model_.features_logit(d);
    d.label = g.uniform<double>() < PlantedCtrModel::sigmoid(d.logit) ? 1.0f : 0.0f;
    return d;
  }

  CtrGeneratorOptions options_;
  PlantedCtrModel model_;
  std::vector<detail::ZipfSampler> zipf_;
  std::array<std::uint64_t, criteo_categorical_fields> id_keys_{};
  std::uint64_t stream_key_ = 0;
};

inline PlantedCtrModel::PlantedCtrModel(const CtrGeneratorOptions& o) {
  o.validate();
  categorical_scale_ = o.categorical_weight_scale;
  for (std::size_t f = 0; f < criteo_categorical_fields; ++f)
    field_keys_[f] = flotilla::detail::mix(flotilla::detail::mix(o.seed, detail::ctr_weight_salt), f);
  const std::uint64_t dense_key = flotilla::detail::mix(o.seed, detail::ctr_dense_salt);
  for (std::size_t j = 0; j < criteo_dense_features; ++j)
    dense_weights_[j] = o.dense_weight_scale * detail::ctr_hashed_normal(flotilla::detail::mix(dense_key, j));
  if (o.bias) {
    bias_ = *o.bias;
    return;
  }
  // Calibration: the logits without bias of a fixed sample, then the bias whose mean probability
  // is the click rate (the mean is increasing in the bias, so bisection converges).
  CtrGeneratorOptions c = o;
  c.bias = 0.0;
  const CtrGenerator sampler(c);
  const std::uint64_t key = flotilla::detail::mix(flotilla::detail::mix(o.seed, detail::ctr_line_salt), detail::ctr_calibration_stream);
  std::vector<double> z(detail::ctr_calibration_lines);
  for (std::size_t i = 0; i < z.size(); ++i) {
    Generator g = sampler.line_generator(key, i);
    z[i] = features_logit(sampler.draw_features(g));
  }
  double lo = -40, hi = 40;
  for (int it = 0; it < 60; ++it) {
    const double mid = 0.5 * (lo + hi);
    double mean = 0;
    for (double v : z) mean += sigmoid(mid + v);
    mean /= static_cast<double>(z.size());
    (mean < o.click_rate ? lo : hi) = mid;
  }
  bias_ = 0.5 * (lo + hi);
}

/// Writes the click log `o` describes to `os` (see CtrGenerator::write).
inline void write_criteo(const CtrGeneratorOptions& o, std::ostream& os) { CtrGenerator(o).write(os); }

/// Writes the click log `o` describes to the file `path` (replacing it). Throws DataError when the
/// file cannot be created or written.
inline void write_criteo(const CtrGeneratorOptions& o, const std::filesystem::path& path) {
  const CtrGenerator g(o);
  std::ofstream os(path, std::ios::binary | std::ios::trunc);
  if (!os) throw DataError(path.string(), 0, "cannot create the file");
  g.write(os, path.string());
}

}  // namespace flotilla::data
#endif  // FLOTILLA_DATA_CTRGENERATOR_HPP_INCLUDED
