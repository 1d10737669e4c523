// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// libFuzzer harness: the CSV loader (and beneath it the line reader and, for input starting with
// the gzip magic bytes, the streaming gzip decoder) on arbitrary bytes, read as classification with
// a label column "y" and as regression with target columns "t" and "u", comma- and
// semicolon-separated. Either a valid data set comes back or a flotilla::Error says why; a crash,
// a sanitizer report, a leak or another exception type is a bug.
//
//   clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -Iinclude -isystem /usr/include/eigen3 \
//       tests/fuzz/csv_reader.cpp -o /tmp/cr && /tmp/cr -max_total_time=60 tests/fuzz/corpus/csv_reader
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "flotilla/data/csv.hpp"

namespace {

namespace data = flotilla::data;

void read(std::span<const std::uint8_t> bytes, const data::CsvOptions& options) {
  try {
    const auto d = data::parse_csv_dataset<float>("fuzz input", bytes, options);
    d.validate();
    if (d.empty() || d.feature_size() == 0) std::abort();
    for (Eigen::Index i = 0; i < d.inputs.size(); ++i)
      if (!options.allow_non_finite && !std::isfinite(d.inputs.data()[i])) std::abort();
    if (options.label.empty() && d.target_size() != options.targets.size()) std::abort();
  } catch (const flotilla::Error&) {
    // Rejected with a message.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  data::CsvOptions labels;
  labels.label = "y";
  labels.max_line_bytes = 4096;
  read(bytes, labels);

  data::CsvOptions named = labels;
  named.class_names = {"a", "b", "c"};
  named.ignore = {""};
  named.delimiter = ';';
  read(bytes, named);

  data::CsvOptions targets;
  targets.targets = {"t", "u"};
  targets.features = {"x"};
  targets.allow_non_finite = true;
  targets.max_line_bytes = 64;
  read(bytes, targets);
  return 0;
}
