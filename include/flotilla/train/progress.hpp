// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_PROGRESS_HPP_INCLUDED
#define FLOTILLA_TRAIN_PROGRESS_HPP_INCLUDED
// Progress of an epoch on a terminal or in a log.
//
// On a terminal one line is redrawn in place (carriage return), at most ten times a second so that
// drawing never costs noticeable time. Elsewhere (CI logs, a file, a pipe) redrawing would leave
// hundreds of lines, so a plain line is written at each tenth of the epoch instead.
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <limits>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flotilla/core/linkage.hpp"

namespace flotilla {

namespace detail {

FLOTILLA_DECL std::string progress_number(double v, int precision, std::chars_format fmt = std::chars_format::general);

/// 1234567 -> "1.23M": three significant digits are all a reader of a progress line takes in.
FLOTILLA_DECL std::string progress_si(double v);

/// 75 s -> "1:15", 3725 s -> "1:02:05".
FLOTILLA_DECL std::string progress_duration(double seconds);

/// The file descriptor behind std::cout / std::cerr / std::clog, or -1 for any other stream: a
/// std::ostream does not expose its descriptor, so only the standard streams can be asked isatty.
FLOTILLA_DECL int progress_stream_fd(const std::ostream& out) noexcept;

}  // namespace detail

/// A progress display for one epoch (or any count of steps). Not thread-safe: call it from the
/// thread that drives training.
class ProgressBar {
 public:
  enum class Style {
    automatic,  ///< bar on a terminal (std::cout / std::cerr / std::clog, TERM not "dumb"), else lines
    bar,        ///< one line redrawn with '\r', at most every 100 ms
    lines,      ///< a plain line at each tenth of total_steps; finish() writes the last
    none,       ///< nothing at all
  };
  /// Where time comes from; tests inject a fake one.
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  /// `total_steps` 0 means unknown: no bar and no ETA, and in lines mode a line every 10 seconds.
  FLOTILLA_DECL ProgressBar(std::ostream& out, std::size_t total_steps, std::string label,
                            Style s = Style::automatic, Clock clock = {});

  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  /// Ends a line left open by the bar (an exception unwound past finish), so that what is printed
  /// next starts on a line of its own.
  FLOTILLA_DECL ~ProgressBar();

  /// The style in use (never automatic).
  Style style() const noexcept { return style_; }

  /// Reports that `step` of total_steps are done, `samples_seen` samples so far, and the running
  /// loss and accuracy (a fraction in [0, 1]; NaN leaves it out, for models that do not classify).
  /// Cheap when nothing is drawn: call it every step.
  FLOTILLA_DECL void update(std::size_t step, std::size_t samples_seen, double loss, double accuracy);

  /// Draws the final state followed by `summary` (e.g. validation results) and ends the line.
  /// Later updates are ignored.
  FLOTILLA_DECL void finish(std::string_view summary);

 private:
  FLOTILLA_DECL static Style resolve(const std::ostream& out, Style s);

  double elapsed(std::chrono::steady_clock::time_point now) const {
    return std::chrono::duration<double>(now - start_).count();
  }

  /// One piece of a progress line; on a narrow terminal the highest `drop_rank` goes first.
  struct Field {
    int drop_rank;
    std::string text;
  };

  /// "123/469", throughput, ETA (or the time taken when done), loss, accuracy.
  FLOTILLA_DECL std::vector<Field> fields(std::chrono::steady_clock::time_point now, bool done) const;

  /// The fields whose drop_rank is at most `keep`, two spaces apart.
  FLOTILLA_DECL static std::string join(const std::vector<Field>& f, int keep = 4);

  FLOTILLA_DECL int terminal_width() const noexcept;

  FLOTILLA_DECL void draw_bar(std::chrono::steady_clock::time_point now, std::string_view summary, bool done = false);

  FLOTILLA_DECL void write_line(std::chrono::steady_clock::time_point now, std::string_view summary, bool done = false);

  std::ostream& out_;
  std::size_t total_;
  std::string label_;
  Clock clock_;
  Style style_;
  int fd_;
  std::chrono::steady_clock::time_point start_, last_draw_{};
  std::size_t step_ = 0, samples_ = 0;
  double loss_ = 0, accuracy_ = 0;
  std::size_t last_tenth_ = 0, last_len_ = 0;
  bool drawn_ = false, finished_ = false;
};

namespace detail {

/// A trainer's bar during an epoch: `step` batches done, `job_samples` samples taken by the whole
/// job, and the running means over the `counted` samples this rank knows the loss of.
FLOTILLA_DECL void show_running(ProgressBar& bar, std::size_t step, std::size_t job_samples, double loss_sum,
                                std::size_t correct, std::size_t counted, bool classifier);

}  // namespace detail

#if FLOTILLA_IMPLEMENTATION
namespace detail {

FLOTILLA_DECL std::string progress_number(double v, int precision, std::chars_format fmt) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, fmt, precision);
  return std::string(buf, r.ptr);
}

FLOTILLA_DECL std::string progress_si(double v) {
  if (!std::isfinite(v)) return progress_number(v, 3);
  const char* suffix = "";
  if (v >= 999.5e6) {
    v /= 1e9, suffix = "G";
  } else if (v >= 999.5e3) {
    v /= 1e6, suffix = "M";
  } else if (v >= 999.5) {
    v /= 1e3, suffix = "k";
  }
  const int decimals = v >= 99.95 ? 0 : v >= 9.995 ? 1 : 2;
  return progress_number(v, decimals, std::chars_format::fixed) + suffix;
}

FLOTILLA_DECL std::string progress_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  if (seconds > 359999) return ">99h";
  const auto s = static_cast<std::uint64_t>(std::llround(seconds));
  // snprintf rather than string concatenation: GCC 12 misreports the latter (-Wrestrict, PR 105329).
  char text[32];
  if (s >= 3600)
    std::snprintf(text, sizeof text, "%llu:%02llu:%02llu", static_cast<unsigned long long>(s / 3600),
                  static_cast<unsigned long long>(s / 60 % 60), static_cast<unsigned long long>(s % 60));
  else
    std::snprintf(text, sizeof text, "%llu:%02llu", static_cast<unsigned long long>(s / 60),
                  static_cast<unsigned long long>(s % 60));
  return text;
}

FLOTILLA_DECL int progress_stream_fd(const std::ostream& out) noexcept {
  if (&out == &std::cout) return STDOUT_FILENO;
  if (&out == &std::cerr || &out == &std::clog) return STDERR_FILENO;
  return -1;
}

}  // namespace detail

FLOTILLA_DECL ProgressBar::ProgressBar(std::ostream& out, std::size_t total_steps, std::string label, Style s,
                                       Clock clock)
    : out_(out),
      total_(total_steps),
      label_(std::move(label)),
      clock_(clock ? std::move(clock) : Clock([] { return std::chrono::steady_clock::now(); })),
      style_(resolve(out, s)),
      fd_(detail::progress_stream_fd(out)),
      start_(clock_()) {}

FLOTILLA_DECL ProgressBar::~ProgressBar() {
  if (style_ == Style::bar && drawn_ && !finished_) {
    try {
      out_ << '\n' << std::flush;
    } catch (...) {
    }
  }
}

FLOTILLA_DECL void ProgressBar::update(std::size_t step, std::size_t samples_seen, double loss, double accuracy) {
  if (style_ == Style::none || finished_) return;
  step_ = step, samples_ = samples_seen, loss_ = loss, accuracy_ = accuracy;
  const auto now = clock_();
  if (style_ == Style::bar) {
    const bool last = total_ > 0 && step >= total_;
    if (drawn_ && !last && now - last_draw_ < std::chrono::milliseconds(100)) return;
    draw_bar(now, "");
    return;
  }
  if (total_ > 0) {
    // Tenths crossed, not reached exactly: steps may jump past a boundary. The end is finish()'s.
    const std::size_t tenth = step >= total_ ? 10 : step * 10 / total_;
    if (tenth <= last_tenth_ || tenth >= 10) return;
    last_tenth_ = tenth;
  } else if (drawn_ ? now - last_draw_ < std::chrono::seconds(10) : now - start_ < std::chrono::seconds(10)) {
    return;
  }
  write_line(now, "");
}

FLOTILLA_DECL void ProgressBar::finish(std::string_view summary) {
  if (style_ == Style::none || finished_) return;
  const auto now = clock_();
  if (style_ == Style::bar) {
    draw_bar(now, summary, true);
    out_ << '\n' << std::flush;
  } else {
    write_line(now, summary, true);
  }
  finished_ = true;
}

FLOTILLA_DECL ProgressBar::Style ProgressBar::resolve(const std::ostream& out, Style s) {
  if (s != Style::automatic) return s;
  const int fd = detail::progress_stream_fd(out);
  if (fd < 0 || ::isatty(fd) != 1) return Style::lines;
  const char* term = std::getenv("TERM");
  return term && std::string_view(term) == "dumb" ? Style::lines : Style::bar;
}

FLOTILLA_DECL std::vector<ProgressBar::Field> ProgressBar::fields(std::chrono::steady_clock::time_point now,
                                                                  bool done) const {
  const double t = elapsed(now);
  std::vector<Field> f;
  f.push_back({0, std::to_string(step_) + (total_ > 0 ? "/" + std::to_string(total_) : "")});
  if (t > 0) f.push_back({4, detail::progress_si(static_cast<double>(samples_) / t) + " samples/s"});
  if (done || (total_ > 0 && step_ >= total_)) {
    f.push_back({2, "in " + detail::progress_duration(t)});
  } else if (total_ > 0 && step_ > 0) {
    f.push_back({2, "ETA " + detail::progress_duration(t * static_cast<double>(total_ - step_) /
                                                       static_cast<double>(step_))});
  }
  f.push_back({1, "loss " + detail::progress_number(loss_, 4)});
  if (!std::isnan(accuracy_)) {  // NaN: the model is no classifier
    f.push_back({3, "acc " + detail::progress_number(accuracy_ * 100, 2, std::chars_format::fixed) + "%"});
  }
  return f;
}

FLOTILLA_DECL std::string ProgressBar::join(const std::vector<Field>& f, int keep) {
  std::string s;
  for (const auto& x : f) {
    if (x.drop_rank > keep) continue;
    if (!s.empty()) s += "  ";
    s += x.text;
  }
  return s;
}

FLOTILLA_DECL int ProgressBar::terminal_width() const noexcept {
  ::winsize ws{};
  if (fd_ >= 0 && ::ioctl(fd_, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

FLOTILLA_DECL void ProgressBar::draw_bar(std::chrono::steady_clock::time_point now,
                                         std::string_view summary, bool done) {
  const std::vector<Field> f = fields(now, done);
  const std::string label = label_.empty() ? std::string() : label_ + " ";
  const std::string tail = summary.empty() ? std::string() : "  " + std::string(summary);
  // The line must stay narrower than the terminal: a wrapped line is not redrawn by '\r'. So
  // on a narrow one the bar goes first, then the least useful fields, whole. The final line is
  // not redrawn and keeps every field, wrapping if it must.
  const std::size_t width = static_cast<std::size_t>(std::max(terminal_width() - 1, 20));
  std::string stats;
  std::size_t bar_w = 0;
  for (int keep = 4; keep >= 0; --keep) {
    stats = join(f, keep) + tail;
    const std::size_t rest = label.size() + stats.size();
    if (total_ > 0 && rest + 13 <= width) {
      bar_w = std::min<std::size_t>(30, width - rest - 3);
      break;
    }
    if (rest <= width || done) break;
  }
  std::string line = label;
  if (bar_w > 0) {
    const double frac = std::min(1.0, static_cast<double>(step_) / static_cast<double>(total_));
    const auto full = static_cast<std::size_t>(frac * static_cast<double>(bar_w));
    std::string bar(bar_w, ' ');
    std::fill_n(bar.begin(), full, '=');
    if (full < bar_w && step_ > 0) bar[full] = '>';
    line += "[" + bar + "] ";
  }
  line += stats;
  if (!done && line.size() > width) line.resize(width);  // a label longer than the terminal
  const std::size_t len = line.size();
  if (len < last_len_) line.append(last_len_ - len, ' ');  // erase what the longer line left
  out_ << '\r' << line << std::flush;
  last_len_ = len;
  last_draw_ = now;
  drawn_ = true;
}

FLOTILLA_DECL void ProgressBar::write_line(std::chrono::steady_clock::time_point now,
                                           std::string_view summary, bool done) {
  std::string line = label_.empty() ? std::string() : label_ + " ";
  line += join(fields(now, done));
  if (!summary.empty()) line += "  " + std::string(summary);
  out_ << line << '\n' << std::flush;
  last_draw_ = now;
  drawn_ = true;
}

namespace detail {

FLOTILLA_DECL void show_running(ProgressBar& bar, std::size_t step, std::size_t job_samples, double loss_sum,
                                std::size_t correct, std::size_t counted, bool classifier) {
  const auto n = static_cast<double>(std::max<std::size_t>(counted, 1));
  bar.update(step, job_samples, loss_sum / n,
             classifier ? static_cast<double>(correct) / n : std::numeric_limits<double>::quiet_NaN());
}

}  // namespace detail
#endif  // FLOTILLA_IMPLEMENTATION

}  // namespace flotilla
#endif  // FLOTILLA_TRAIN_PROGRESS_HPP_INCLUDED
