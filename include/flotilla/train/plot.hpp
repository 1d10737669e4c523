// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_PLOT_HPP_INCLUDED
#define FLOTILLA_TRAIN_PLOT_HPP_INCLUDED
// Learning curves as a self-contained SVG: loss and accuracy against epoch, side by side. Any
// browser shows it, it needs no library or script, and rewriting it after every epoch is cheap.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/core/linkage.hpp"
#include "flotilla/train/history.hpp"

namespace flotilla {

namespace detail {

/// Text for SVG coordinates and labels: fixed decimals, never a locale's comma.
FLOTILLA_DECL std::string svg_fixed(double v, int decimals);

inline std::string svg_coord(double v) { return svg_fixed(v, 1); }

FLOTILLA_DECL void svg_escape(std::string& out, std::string_view s);

/// The smallest of 1, 2, 5 times a power of ten that is at least `raw`.
FLOTILLA_DECL double plot_nice_step(double raw);

/// One axis: its range in data units, its ticks, and how to label them.
struct PlotAxis {
  double lo = 0, hi = 1;
  bool log = false;      ///< positions are proportional to log10(value)
  bool percent = false;  ///< labels are value * 100 with a % sign
  std::vector<double> ticks;
  int decimals = 0;

  double fraction(double v) const {
    if (log) return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
    return (v - lo) / (hi - lo);
  }

  FLOTILLA_DECL std::string label(double v) const;
};

/// A linear axis covering [lo, hi] with about `target` ticks at round values. The range is widened
/// to the enclosing ticks so that curves never touch the frame between ticks.
FLOTILLA_DECL PlotAxis plot_linear_axis(double lo, double hi, int target, bool integral);

/// A log axis over whole decades; with few decades, 2 and 5 times each are ticks too.
FLOTILLA_DECL PlotAxis plot_log_axis(double lo, double hi);

struct PlotSeries {
  std::string_view name;
  std::string_view color;
  bool dashed = false;
  std::vector<std::pair<double, double>> points;  ///< (epoch, value), in record order
};

inline bool plot_usable(double v, bool log) { return std::isfinite(v) && (!log || v > 0); }

/// One panel: frame, grid, ticks, curves, and a header with its title and legend.
FLOTILLA_DECL void svg_panel(std::string& out, double x0, double y0, double w, double h, std::string_view title,
                             const std::vector<PlotSeries>& series, bool accuracy);

}  // namespace detail

/// The learning curves of `history` as SVG text: loss (train, and validation where measured) on
/// the left, accuracy on the right (or, for records without accuracies, the validation AUC of
/// their "auc" extra), against epoch. Non-finite values break a curve; a loss that
/// spans two orders of magnitude or more is drawn on a log axis.
FLOTILLA_DECL std::string svg_plot(const History& history, std::string_view title);

/// Writes svg_plot(history, title) to `path`, replacing the file at once (through a temporary
/// file and a rename) so that a browser reloading it never sees half a plot. Throws ConfigError
/// naming the path and the reason when it cannot be written.
FLOTILLA_DECL void write_svg_plot(const std::filesystem::path& path, const History& history, std::string_view title);

#if FLOTILLA_IMPLEMENTATION
namespace detail {

FLOTILLA_DECL std::string svg_fixed(double v, int decimals) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, decimals);
  std::string s(buf, r.ptr);
  // "-0.0" (a tiny negative rounded away) would be an odd tick label.
  if (s[0] == '-' && s.find_first_not_of("0.", 1) == std::string::npos) s.erase(0, 1);
  return s;
}

FLOTILLA_DECL void svg_escape(std::string& out, std::string_view s) {
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters other than tab and line breaks are not allowed in XML 1.0 at all.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n' || c == '\r') out += c;
    }
  }
}

FLOTILLA_DECL double plot_nice_step(double raw) {
  if (!(raw > 0) || !std::isfinite(raw)) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= raw * (1 - 1e-9)) return m * p;
  }
  return 10 * p;
}

FLOTILLA_DECL std::string PlotAxis::label(double v) const {
  if (log) {
    // 0.0001 ... 100000 written out; beyond, 1e-05 and 1e+06 read better than runs of zeros.
    const auto fmt = v >= 1e-4 && v < 1e6 ? std::chars_format::fixed : std::chars_format::scientific;
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v, fmt);
    return std::string(buf, r.ptr);
  }
  if (percent) return svg_fixed(v * 100, std::max(0, decimals - 2)) + "%";
  if (std::abs(v) >= 1e6 || decimals > 6) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 3);
    return std::string(buf, r.ptr);
  }
  return svg_fixed(v, decimals);
}

FLOTILLA_DECL PlotAxis plot_linear_axis(double lo, double hi, int target, bool integral) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {
    // A constant: give it room above and below rather than dividing by a zero range.
    const double d = integral ? 1 : (lo != 0 ? std::abs(lo) * 0.1 : 1);
    lo -= d, hi += d;
  }
  double step = plot_nice_step((hi - lo) / std::max(1, target - 1));
  if (integral) step = std::max(step, 1.0);
  PlotAxis a;
  a.lo = std::floor(lo / step + 1e-9) * step;
  a.hi = std::ceil(hi / step - 1e-9) * step;
  if (a.hi <= a.lo) a.hi = a.lo + step;
  a.decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  for (int i = 0;; ++i) {
    const double t = a.lo + i * step;
    if (t > a.hi + step * 1e-6 || i > 1000) break;
    a.ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  }
  return a;
}

FLOTILLA_DECL PlotAxis plot_log_axis(double lo, double hi) {
  PlotAxis a;
  a.log = true;
  const int d0 = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
  const int d1 = std::max(d0 + 1, static_cast<int>(std::ceil(std::log10(hi) - 1e-9)));
  a.lo = std::pow(10.0, d0), a.hi = std::pow(10.0, d1);
  const int every = (d1 - d0 + 5) / 6;  // at most about six labelled decades
  for (int d = d0; d <= d1; ++d) {
    if ((d - d0) % every != 0 && d != d1) continue;
    a.ticks.push_back(std::pow(10.0, d));
    if (d1 - d0 <= 2 && d < d1) {
      a.ticks.push_back(2 * std::pow(10.0, d));
      a.ticks.push_back(5 * std::pow(10.0, d));
    }
  }
  std::sort(a.ticks.begin(), a.ticks.end());
  return a;
}

FLOTILLA_DECL void svg_panel(std::string& out, double x0, double y0, double w, double h, std::string_view title,
                             const std::vector<PlotSeries>& series, bool accuracy) {
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  std::size_t shown_points = 0;
  for (const auto& s : series) {
    for (const auto& [x, y] : s.points) {
      xlo = std::min(xlo, x), xhi = std::max(xhi, x);
      if (std::isfinite(y)) ylo = std::min(ylo, y), yhi = std::max(yhi, y), ++shown_points;
    }
  }
  const bool has_data = shown_points > 0;
  if (!std::isfinite(xlo)) xlo = 1, xhi = 1;
  PlotAxis xa = plot_linear_axis(xlo, xhi, 8, true);
  if (xlo == xhi) {  // one epoch: centre it instead of pinning it to the frame
    xa = plot_linear_axis(std::max(0.0, xlo - 1), xlo + 1, 3, true);
  }
  PlotAxis ya;
  // Loss falls over orders of magnitude; on a linear axis every epoch after the first few is flat.
  if (!accuracy && has_data && ylo > 0 && yhi / ylo >= 50) {
    ya = plot_log_axis(ylo, yhi);
  } else if (has_data) {
    ya = plot_linear_axis(ylo, yhi, 6, false);
    const bool nonnegative = ylo >= 0, fraction = accuracy && ylo >= 0 && yhi <= 1;
    if (nonnegative && ya.lo < 0) ya = plot_linear_axis(0, yhi > 0 ? yhi : 1, 6, false);
    if (fraction) {
      ya.percent = true;
      ya.hi = std::min(ya.hi, 1.0);
      if (ya.hi <= ya.lo) ya.hi = 1, ya.lo = std::max(0.0, ya.lo - 0.1);
      std::erase_if(ya.ticks, [&](double t) { return t > ya.hi + 1e-12; });
    }
  } else {
    ya = plot_linear_axis(0, 1, 6, false);
    ya.percent = accuracy;
  }

  std::size_t label_chars = 1;
  for (const double t : ya.ticks) label_chars = std::max(label_chars, ya.label(t).size());
  const double left = x0 + 14 + 7.0 * static_cast<double>(label_chars), right = x0 + w - 18;
  const double top = y0 + 30, bottom = y0 + h - 44;
  const auto px = [&](double x) { return left + (right - left) * xa.fraction(x); };
  const auto py = [&](double y) { return bottom - (bottom - top) * ya.fraction(y); };

  // Header: the title on the left, the legend right-aligned above the frame, so it never hides a curve.
  out += "<text x=\"" + svg_coord(left) + "\" y=\"" + svg_coord(y0 + 16) +
         "\" font-size=\"14\" font-weight=\"bold\" fill=\"#222\">";
  svg_escape(out, title);
  if (ya.log) out += " <tspan font-weight=\"normal\" fill=\"#777\" font-size=\"12\">(log scale)</tspan>";
  out += "</text>\n";
  double lx = right;
  for (auto it = series.rbegin(); it != series.rend(); ++it) {
    // A curve with nothing to draw (no validation, a regression's accuracy) gets no entry.
    if (std::none_of(it->points.begin(), it->points.end(), [](const auto& p) { return std::isfinite(p.second); })) {
      continue;
    }
    lx -= 7.0 * static_cast<double>(it->name.size()) + 6;
    out += "<text x=\"" + svg_coord(lx) + "\" y=\"" + svg_coord(y0 + 16) + "\" font-size=\"12\" fill=\"#333\">";
    svg_escape(out, it->name);
    out += "</text>\n";
    lx -= 28;
    out += "<line x1=\"" + svg_coord(lx) + "\" y1=\"" + svg_coord(y0 + 12) + "\" x2=\"" + svg_coord(lx + 22) +
           "\" y2=\"" + svg_coord(y0 + 12) + "\" stroke=\"" + std::string(it->color) + "\" stroke-width=\"2.5\"" +
           (it->dashed ? " stroke-dasharray=\"6 3\"" : "") + "/>\n";
    lx -= 14;
  }

  // Grid and ticks.
  out += "<g stroke=\"#e5e5e5\" stroke-width=\"1\">\n";
  for (const double t : ya.ticks) {
    out += "<line x1=\"" + svg_coord(left) + "\" y1=\"" + svg_coord(py(t)) + "\" x2=\"" + svg_coord(right) +
           "\" y2=\"" + svg_coord(py(t)) + "\"/>\n";
  }
  for (const double t : xa.ticks) {
    out += "<line x1=\"" + svg_coord(px(t)) + "\" y1=\"" + svg_coord(top) + "\" x2=\"" + svg_coord(px(t)) + "\" y2=\"" +
           svg_coord(bottom) + "\"/>\n";
  }
  out += "</g>\n<g stroke=\"#444\" stroke-width=\"1\">\n";
  for (const double t : ya.ticks) {
    out += "<line x1=\"" + svg_coord(left - 5) + "\" y1=\"" + svg_coord(py(t)) + "\" x2=\"" + svg_coord(left) +
           "\" y2=\"" + svg_coord(py(t)) + "\"/>\n";
  }
  for (const double t : xa.ticks) {
    out += "<line x1=\"" + svg_coord(px(t)) + "\" y1=\"" + svg_coord(bottom) + "\" x2=\"" + svg_coord(px(t)) +
           "\" y2=\"" + svg_coord(bottom + 5) + "\"/>\n";
  }
  out += "</g>\n<rect x=\"" + svg_coord(left) + "\" y=\"" + svg_coord(top) + "\" width=\"" + svg_coord(right - left) +
         "\" height=\"" + svg_coord(bottom - top) + "\" fill=\"none\" stroke=\"#444\" stroke-width=\"1\"/>\n";
  out += "<g font-size=\"11\" fill=\"#333\">\n";
  for (const double t : ya.ticks) {
    out += "<text x=\"" + svg_coord(left - 8) + "\" y=\"" + svg_coord(py(t) + 4) + "\" text-anchor=\"end\">" +
           ya.label(t) + "</text>\n";
  }
  for (const double t : xa.ticks) {
    out += "<text x=\"" + svg_coord(px(t)) + "\" y=\"" + svg_coord(bottom + 18) + "\" text-anchor=\"middle\">" +
           xa.label(t) + "</text>\n";
  }
  out += "</g>\n<text x=\"" + svg_coord((left + right) / 2) + "\" y=\"" + svg_coord(bottom + 36) +
         "\" font-size=\"12\" fill=\"#333\" text-anchor=\"middle\">epoch</text>\n";

  if (!has_data) {
    out += "<text x=\"" + svg_coord((left + right) / 2) + "\" y=\"" + svg_coord((top + bottom) / 2) +
           "\" font-size=\"13\" fill=\"#999\" text-anchor=\"middle\">no data</text>\n";
    return;
  }

  // Curves: a NaN or infinity (a diverged epoch) breaks the line instead of bending it to the frame.
  const bool markers = shown_points <= 4 * 40;
  for (const auto& s : series) {
    std::vector<std::vector<std::pair<double, double>>> runs(1);
    for (const auto& [x, y] : s.points) {
      if (plot_usable(y, ya.log)) {
        runs.back().emplace_back(px(x), py(y));
      } else if (!runs.back().empty()) {
        runs.emplace_back();
      }
    }
    for (const auto& run : runs) {
      if (run.size() >= 2) {
        out += "<polyline fill=\"none\" stroke=\"" + std::string(s.color) +
               "\" stroke-width=\"2\" stroke-linejoin=\"round\" stroke-linecap=\"round\"" +
               (s.dashed ? " stroke-dasharray=\"6 3\"" : "") + " points=\"";
        for (std::size_t i = 0; i < run.size(); ++i) {
          if (i) out += ' ';
          out += svg_coord(run[i].first) + "," + svg_coord(run[i].second);
        }
        out += "\"/>\n";
      }
    }
    // Markers show where the measurements are, and make a lone point (one epoch) visible at all.
    for (const auto& point : s.points) {
      const double x = point.first, y = point.second;
      if (!plot_usable(y, ya.log)) continue;
      const std::pair<double, double> at(px(x), py(y));
      const bool isolated =
          std::any_of(runs.begin(), runs.end(), [&](const auto& r) { return r.size() == 1 && r[0] == at; });
      if (!markers && !isolated) continue;
      out += "<circle cx=\"" + svg_coord(at.first) + "\" cy=\"" + svg_coord(at.second) + "\" r=\"3\" fill=\"" +
             std::string(s.color) + "\"><title>";
      svg_escape(out, s.name);
      out += ", epoch " + xa.label(x) + ": ";
      char buf[64];
      const auto r = std::to_chars(buf, buf + sizeof buf, y);
      out.append(buf, r.ptr);
      out += "</title></circle>\n";
    }
  }
}

}  // namespace detail

FLOTILLA_DECL std::string svg_plot(const History& history, std::string_view title) {
  constexpr double width = 1000, height = 420, head = 44;
  const std::string_view blue = "#1f77b4", orange = "#ff7f0e";
  detail::PlotSeries train_loss{"train", blue, false, {}}, val_loss{"validation", orange, true, {}};
  detail::PlotSeries train_acc{"train", blue, false, {}}, val_acc{"validation", orange, true, {}};
  for (const auto& r : history) {
    const auto e = static_cast<double>(r.epoch);
    train_loss.points.emplace_back(e, r.train_loss);
    train_acc.points.emplace_back(e, r.train_accuracy);
    // An epoch that was not validated is a gap in the data, not a break in the curve.
    if (r.val_loss) val_loss.points.emplace_back(e, *r.val_loss);
    if (r.val_accuracy) val_acc.points.emplace_back(e, *r.val_accuracy);
  }
  std::string out;
  out.reserve(4096 + 400 * history.size());
  out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + detail::svg_fixed(width, 0) + "\" height=\"" +
         detail::svg_fixed(height, 0) + "\" viewBox=\"0 0 " + detail::svg_fixed(width, 0) + " " +
         detail::svg_fixed(height, 0) + "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n";
  out += "<title>";
  detail::svg_escape(out, title);
  out += "</title>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out += "<text x=\"" + detail::svg_fixed(width / 2, 0) +
         "\" y=\"28\" font-size=\"18\" font-weight=\"bold\" fill=\"#222\" text-anchor=\"middle\">";
  detail::svg_escape(out, title);
  out += "</text>\n";
  detail::svg_panel(out, 0, head, width / 2, height - head, "Loss", {train_loss, val_loss}, false);
  // A run without accuracies (click-through models) plots the validation AUC its records carry.
  const bool accuracies = std::any_of(history.begin(), history.end(), [](const EpochRecord& r) {
    return std::isfinite(r.train_accuracy) || (r.val_accuracy && std::isfinite(*r.val_accuracy));
  });
  detail::PlotSeries auc{"validation", orange, true, {}};
  if (!accuracies)
    for (const auto& r : history)
      for (const auto& [name, value] : r.extra)
        if (name == "auc") auc.points.emplace_back(static_cast<double>(r.epoch), value);
  if (accuracies || auc.points.empty()) {
    detail::svg_panel(out, width / 2, head, width / 2, height - head, "Accuracy", {train_acc, val_acc}, true);
  } else {
    detail::svg_panel(out, width / 2, head, width / 2, height - head, "AUC", {auc}, false);
  }
  out += "</svg>\n";
  return out;
}

FLOTILLA_DECL void write_svg_plot(const std::filesystem::path& path, const History& history, std::string_view title) {
  const std::string text = svg_plot(history, title);
  std::filesystem::path tmp = path;
  tmp += ".tmp-" + std::to_string(::getpid());
  const auto fail = [&](const std::string& what, int err) {
    std::remove(tmp.c_str());
    throw ConfigError("cannot write plot " + path.string() + ": " + what + ": " +
                      std::error_code(err, std::generic_category()).message());
  };
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail("cannot create " + tmp.string(), errno);
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const int write_err = errno;
  if (std::fclose(f) != 0 || !wrote) fail("cannot write " + tmp.string(), wrote ? errno : write_err);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename " + tmp.string() + " to it", errno);
}
#endif  // FLOTILLA_IMPLEMENTATION

}  // namespace flotilla
#endif  // FLOTILLA_TRAIN_PLOT_HPP_INCLUDED
