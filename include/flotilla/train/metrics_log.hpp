// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_METRICSLOG_HPP_INCLUDED
#define FLOTILLA_TRAIN_METRICSLOG_HPP_INCLUDED
// Per-epoch metrics on disk, as JSON lines or CSV, for plotting and comparing runs with ordinary
// tools (pandas, jq, a spreadsheet).
//
// Each record reaches the kernel with one write(2) as soon as it is given, so a run that is killed
// keeps every epoch it finished. Numbers are printed in the shortest form that reads back to the
// same double (std::to_chars), independent of the locale.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iterator>
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

/// The columns every record has, in file order; extras follow them.
inline constexpr std::string_view metrics_fixed_columns[] = {
    "epoch",   "step",         "train_loss", "train_accuracy", "val_loss", "val_accuracy", "samples_per_second",
    "seconds", "learning_rate"};

FLOTILLA_DECL void metrics_append_number(std::string& out, double v);

FLOTILLA_DECL void metrics_append_number(std::string& out, std::uint64_t v);

/// Length of the valid UTF-8 sequence starting at s[i], or 0 when the bytes there are not one
/// (overlong forms, surrogates and values past U+10FFFF included).
FLOTILLA_DECL std::size_t metrics_utf8_sequence_length(std::string_view s, std::size_t i) noexcept;

/// A JSON string literal. Invalid UTF-8 becomes U+FFFD so that the line stays valid JSON.
FLOTILLA_DECL void metrics_append_json_string(std::string& out, std::string_view s);

/// A CSV field per RFC 4180: quoted when it holds a separator, quote or line break.
FLOTILLA_DECL void metrics_append_csv_field(std::string& out, std::string_view s);

/// CSV has no null: non-finite values are written the way numpy and pandas read them back.
FLOTILLA_DECL void metrics_append_csv_number(std::string& out, double v);

FLOTILLA_DECL void metrics_append_json_number(std::string& out, double v);

inline std::string metrics_errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

}  // namespace detail

/// Appends one line per epoch to a JSON-lines or CSV file.
///
/// JSON lines: one object per line with the keys of detail::metrics_fixed_columns (a validation
/// value that was not measured is null, as are NaN and infinities), then the record's extras as
/// further keys in their order.
///
/// CSV: a header row, written once, then one row per record. The columns are fixed by the first
/// record: the fixed ones, then that record's extras. A later record's extra that is not a column
/// is left out (give every extra in the first record, NaN if it has no value yet), and a column
/// the record lacks is left empty, as is a validation value that was not measured. NaN and
/// infinities are written nan, inf and -inf.
class MetricsLog {
 public:
  enum class Format {
    from_extension,  ///< .jsonl and .ndjson are JSON lines, .csv is CSV (case-insensitive); .json is refused
    jsonl,
    csv,
  };
  enum class OpenMode {
    truncate,  ///< start a new file
    /// Continue an existing one (a resumed run). A CSV file keeps its header's columns; a line cut
    /// short by a killed run is dropped first so the next record starts on a line of its own.
    append,
  };

  /// Opens (creates) `path`. Throws ConfigError naming the path and the reason when it cannot be
  /// written or its format is not known.
  FLOTILLA_DECL explicit MetricsLog(std::filesystem::path path, Format f = Format::from_extension,
                                    OpenMode mode = OpenMode::truncate);

  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  MetricsLog(MetricsLog&& o) noexcept
      : path_(std::move(o.path_)),
        format_(o.format_),
        fd_(std::exchange(o.fd_, -1)),
        header_written_(o.header_written_),
        columns_(std::move(o.columns_)) {}
  FLOTILLA_DECL MetricsLog& operator=(MetricsLog&& o) noexcept;
  ~MetricsLog() { close_fd(); }

  const std::filesystem::path& path() const noexcept { return path_; }
  /// The format in use (never from_extension).
  Format format() const noexcept { return format_; }

  /// Writes one record and hands it to the kernel. Throws ConfigError when an extra's name repeats
  /// or reuses a fixed column, or when the write fails (disk full).
  FLOTILLA_DECL void write(const EpochRecord& r);

 private:
  FLOTILLA_DECL static Format resolve(const std::filesystem::path& p, Format f);

  [[noreturn]] void fail(const char* what, int err) const {
    throw ConfigError("metrics log " + path_.string() + ": " + what + ": " + detail::metrics_errno_text(err));
  }

  FLOTILLA_DECL void check_extras(const EpochRecord& r) const;

  FLOTILLA_DECL static std::string json_line(const EpochRecord& r);

  FLOTILLA_DECL std::string csv_header() const;

  FLOTILLA_DECL std::string csv_row(const EpochRecord& r) const;

  FLOTILLA_DECL void write_all(std::string_view s);

  /// For append: drops a torn last line and, for CSV, takes the columns from the existing header.
  FLOTILLA_DECL void prepare_append();

  /// The fields of the first record of `text` (a quoted field may hold a line break).
  FLOTILLA_DECL static std::vector<std::string> parse_csv_header(std::string_view text);

  void close_fd() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  std::filesystem::path path_;
  Format format_;
  int fd_ = -1;
  bool header_written_ = false;
  std::vector<std::string> columns_;  // CSV extras, fixed by the header
};

#if FLOTILLA_IMPLEMENTATION
namespace detail {

FLOTILLA_DECL void metrics_append_number(std::string& out, double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  out.append(buf, r.ptr);
}

FLOTILLA_DECL void metrics_append_number(std::string& out, std::uint64_t v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

FLOTILLA_DECL std::size_t metrics_utf8_sequence_length(std::string_view s, std::size_t i) noexcept {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  std::size_t n;
  std::uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2, cp = c & 0x1Fu;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3, cp = c & 0x0Fu;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4, cp = c & 0x07u;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3Fu);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

FLOTILLA_DECL void metrics_append_json_string(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else if (c >= 0x80) {
      const std::size_t n = metrics_utf8_sequence_length(s, i);
      if (n == 0) {
        out += "\\ufffd";
        ++i;
        continue;
      }
      out.append(s.substr(i, n));
      i += n;
      continue;
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
  out += '"';
}

FLOTILLA_DECL void metrics_append_csv_field(std::string& out, std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos && (s.empty() || (s.front() != ' ' && s.back() != ' '))) {
    out.append(s);
    return;
  }
  out += '"';
  for (const char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

FLOTILLA_DECL void metrics_append_csv_number(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "nan";
  } else if (std::isinf(v)) {
    out += v > 0 ? "inf" : "-inf";
  } else {
    metrics_append_number(out, v);
  }
}

FLOTILLA_DECL void metrics_append_json_number(std::string& out, double v) {
  if (std::isfinite(v)) {
    metrics_append_number(out, v);
  } else {
    out += "null";  // JSON has no NaN or infinity
  }
}

}  // namespace detail

FLOTILLA_DECL MetricsLog::MetricsLog(std::filesystem::path path, Format f, OpenMode mode)
    : path_(std::move(path)), format_(resolve(path_, f)) {
  if (mode == OpenMode::append) prepare_append();
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (mode == OpenMode::append ? O_APPEND : O_TRUNC);
  fd_ = ::open(path_.c_str(), flags, 0644);
  if (fd_ < 0) fail("cannot open", errno);
}

FLOTILLA_DECL MetricsLog& MetricsLog::operator=(MetricsLog&& o) noexcept {
  if (this != &o) {
    close_fd();
    path_ = std::move(o.path_);
    format_ = o.format_;
    fd_ = std::exchange(o.fd_, -1);
    header_written_ = o.header_written_;
    columns_ = std::move(o.columns_);
  }
  return *this;
}

FLOTILLA_DECL void MetricsLog::write(const EpochRecord& r) {
  check_extras(r);
  std::string line;
  if (format_ == Format::jsonl) {
    line = json_line(r);
  } else {
    if (!header_written_) {
      columns_.clear();
      for (const auto& [name, value] : r.extra) columns_.push_back(name);
      line = csv_header();
    }
    line += csv_row(r);
  }
  write_all(line);
  header_written_ = true;
}

FLOTILLA_DECL MetricsLog::Format MetricsLog::resolve(const std::filesystem::path& p, Format f) {
  if (f != Format::from_extension) return f;
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (ext == ".jsonl" || ext == ".ndjson") return Format::jsonl;
  if (ext == ".csv") return Format::csv;
  if (ext == ".json")  // a reader of .json expects one document, not a line an epoch
    throw ConfigError("metrics log " + p.string() + ": the metrics are JSON lines, one object an epoch, which a "
                      ".json file (one JSON document) would not hold: name it .jsonl, or name the format");
  throw ConfigError("metrics log " + p.string() + ": cannot tell the format from the extension '" + ext +
                    "' (use .jsonl, .ndjson or .csv, or name the format)");
}

FLOTILLA_DECL void MetricsLog::check_extras(const EpochRecord& r) const {
  for (std::size_t i = 0; i < r.extra.size(); ++i) {
    const std::string& name = r.extra[i].first;
    const auto& fixed = detail::metrics_fixed_columns;
    const bool clash = std::find(std::begin(fixed), std::end(fixed), name) != std::end(fixed);
    bool repeated = false;
    for (std::size_t j = 0; j < i; ++j) repeated = repeated || r.extra[j].first == name;
    if (clash || repeated || name.empty()) {
      throw ConfigError("metrics log " + path_.string() + ": epoch " + std::to_string(r.epoch) + ": extra value '" +
                        name + "' " +
                        (name.empty() ? "has no name"
                         : clash      ? "reuses a fixed column's name"
                                      : "is given twice"));
    }
  }
}

FLOTILLA_DECL std::string MetricsLog::json_line(const EpochRecord& r) {
  std::string s = "{\"epoch\":";
  detail::metrics_append_number(s, r.epoch);
  s += ",\"step\":";
  detail::metrics_append_number(s, r.step);
  const auto field = [&s](std::string_view key, std::optional<double> v) {
    s += ",\"";
    s += key;
    s += "\":";
    if (v) {
      detail::metrics_append_json_number(s, *v);
    } else {
      s += "null";
    }
  };
  field("train_loss", r.train_loss);
  field("train_accuracy", r.train_accuracy);
  field("val_loss", r.val_loss);
  field("val_accuracy", r.val_accuracy);
  field("samples_per_second", r.samples_per_second);
  field("seconds", r.seconds);
  field("learning_rate", r.learning_rate);
  for (const auto& [name, value] : r.extra) {
    s += ',';
    detail::metrics_append_json_string(s, name);
    s += ':';
    detail::metrics_append_json_number(s, value);
  }
  s += "}\n";
  return s;
}

FLOTILLA_DECL std::string MetricsLog::csv_header() const {
  std::string s;
  for (const auto c : detail::metrics_fixed_columns) {
    if (!s.empty()) s += ',';
    s += c;
  }
  for (const auto& c : columns_) {
    s += ',';
    detail::metrics_append_csv_field(s, c);
  }
  s += '\n';
  return s;
}

FLOTILLA_DECL std::string MetricsLog::csv_row(const EpochRecord& r) const {
  std::string s;
  detail::metrics_append_number(s, r.epoch);
  s += ',';
  detail::metrics_append_number(s, r.step);
  for (const std::optional<double> v : {std::optional<double>(r.train_loss), std::optional<double>(r.train_accuracy),
                                        r.val_loss, r.val_accuracy, std::optional<double>(r.samples_per_second),
                                        std::optional<double>(r.seconds), std::optional<double>(r.learning_rate)}) {
    s += ',';
    if (v) detail::metrics_append_csv_number(s, *v);
  }
  for (const auto& c : columns_) {
    s += ',';
    const auto it = std::find_if(r.extra.begin(), r.extra.end(), [&](const auto& e) { return e.first == c; });
    if (it != r.extra.end()) detail::metrics_append_csv_number(s, it->second);
  }
  s += '\n';
  return s;
}

FLOTILLA_DECL void MetricsLog::write_all(std::string_view s) {
  // One write(2) for the whole line in the usual case, so a reader never sees half a record.
  while (!s.empty()) {
    const ::ssize_t n = ::write(fd_, s.data(), s.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write", errno);
    }
    s.remove_prefix(static_cast<std::size_t>(n));
  }
}

FLOTILLA_DECL void MetricsLog::prepare_append() {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path_, ec);
  if (ec || size == 0) return;  // nothing to continue; open() reports an unusable path
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open", errno);
  std::string text(static_cast<std::size_t>(size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ::ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  const std::size_t keep = text.empty() || text.back() == '\n' ? text.size() : text.rfind('\n') + 1;  // npos+1 == 0
  if (keep != text.size()) {
    std::filesystem::resize_file(path_, keep, ec);
    if (ec) fail("cannot drop the incomplete last line", ec.value());
    text.resize(keep);
  }
  if (format_ != Format::csv || text.empty()) return;
  const std::vector<std::string> header = parse_csv_header(text);
  const std::size_t nfixed = std::size(detail::metrics_fixed_columns);
  if (header.size() < nfixed ||
      !std::equal(detail::metrics_fixed_columns, detail::metrics_fixed_columns + nfixed, header.begin())) {
    throw ConfigError("metrics log " + path_.string() +
                      ": cannot append: the existing header row is not the one this version writes");
  }
  columns_.assign(header.begin() + static_cast<std::ptrdiff_t>(nfixed), header.end());
  header_written_ = true;
}

FLOTILLA_DECL std::vector<std::string> MetricsLog::parse_csv_header(std::string_view text) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (!quoted && (c == '\n' || c == '\r')) break;
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}
#endif  // FLOTILLA_IMPLEMENTATION

}  // namespace flotilla
#endif  // FLOTILLA_TRAIN_METRICSLOG_HPP_INCLUDED
