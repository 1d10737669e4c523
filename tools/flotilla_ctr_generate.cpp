// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// flotilla-ctr-generate: writes a synthetic click log in the Criteo format, labelled by a known
// logistic model (flotilla/data/ctr_generator.hpp), and optionally a held-out file drawn from the
// same model. docs/ctr_generator.md describes the model and the flags.
//
//   flotilla-ctr-generate --lines 4000000 --out train.txt --test-lines 500000 --test-out test.txt
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <iostream>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "flotilla/cli/flags.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/data/ctr_generator.hpp"
#include "flotilla/train/binary_metrics.hpp"

namespace {

namespace data = flotilla::data;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void write_file(const data::CtrGeneratorOptions& o, const std::filesystem::path& path, const char* what) {
  const auto t0 = std::chrono::steady_clock::now();
  data::write_criteo(o, path);
  const double s = seconds_since(t0);
  std::cout << what << ": " << o.lines << " lines to " << path.string() << " in " << s << " s";
  if (s > 0) std::cout << " (" << static_cast<double>(o.lines) / s << " lines/s)";
  std::cout << "\n";
}

int run(int argc, char** argv) {
  flotilla::cli::Flags flags("flotilla-ctr-generate",
                             "writes a synthetic click log in the Criteo format (label, 13 integer features, 26 "
                             "hex IDs, tab-separated), labelled by a planted logistic model");
  const data::CtrGeneratorOptions defaults;
  auto& lines = flags.add<std::uint64_t>("lines", 0, "lines of the training file (required, >= 1)");
  auto& out = flags.add<std::string>("out", "", "the training file to write (required)");
  auto& seed = flags.add<std::uint64_t>("seed", defaults.seed, "seed of the planted model and of the lines");
  auto& zipf = flags.add<double>("zipf", defaults.zipf, "Zipf exponent of the ID frequencies, in (0, 10]");
  auto& click_rate = flags.add<double>("click-rate", defaults.click_rate, "share of clicks the bias is set for, in (0, 1)");
  auto& weight_scale = flags.add<double>("weight-scale", defaults.categorical_weight_scale,
                                         "standard deviation of an ID's weight in the planted model");
  auto& dense_weight_scale = flags.add<double>("dense-weight-scale", defaults.dense_weight_scale,
                                               "standard deviation of a dense feature's weight in the planted model");
  auto& max_vocabulary = flags.add<std::uint64_t>(
      "max-vocabulary", defaults.vocabulary.back(),
      "IDs of the largest field; the 26 fields' vocabularies are spread geometrically from 10 to it");
  auto& test_lines = flags.add<std::uint64_t>("test-lines", 0, "lines of the held-out file (0: none)");
  auto& test_out = flags.add<std::string>("test-out", "", "the held-out file to write (with --test-lines)");
  auto& report = flags.add<bool>("report", true,
                                 "print the planted model's AUC and log loss on the held-out lines: the best a "
                                 "model can reach");
  auto& threads = flags.add<unsigned>("threads", std::max(1U, std::thread::hardware_concurrency()),
                                      "threads that format lines (the files do not depend on it)");
  flags.at_least("lines", 1).at_least("threads", 1).above("zipf", 0).at_least("max-vocabulary", 10);
  if (!flags.parse(argc, argv, std::cout)) return 0;

  if (lines == 0) throw flotilla::ConfigError("flotilla-ctr-generate: --lines N is required (see --help)");
  if (out.empty()) throw flotilla::ConfigError("flotilla-ctr-generate: --out FILE is required (see --help)");
  if (test_lines > 0 && test_out.empty())
    throw flotilla::ConfigError("flotilla-ctr-generate: --test-lines " + std::to_string(test_lines) +
                                " needs --test-out FILE");
  if (test_lines == 0 && !test_out.empty())
    throw flotilla::ConfigError("flotilla-ctr-generate: --test-out " + test_out + " needs --test-lines N (>= 1)");
  if (!test_out.empty() && std::filesystem::path(test_out) == std::filesystem::path(out))
    throw flotilla::ConfigError("flotilla-ctr-generate: --out and --test-out are the same file (" + out + ")");

  data::CtrGeneratorOptions o;
  o.seed = seed;
  o.lines = lines;
  o.zipf = zipf;
  o.click_rate = click_rate;
  o.categorical_weight_scale = weight_scale;
  o.dense_weight_scale = dense_weight_scale;
  o.threads = threads;
  const double top = static_cast<double>(max_vocabulary);
  for (std::size_t f = 0; f < o.vocabulary.size(); ++f)
    o.vocabulary[f] = static_cast<std::uint64_t>(
        std::llround(10.0 * std::pow(top / 10.0, static_cast<double>(f) / static_cast<double>(o.vocabulary.size() - 1))));
  try {
    o.validate();
  } catch (const flotilla::ConfigError& e) {
    throw flotilla::ConfigError(std::string("flotilla-ctr-generate: ") + e.what());
  }

  write_file(o, out, "train");
  if (test_lines > 0) {
    const data::CtrGeneratorOptions t = o.held_out(test_lines);
    write_file(t, test_out, "test");
    if (report) {
      const data::CtrGenerator g(t);
      std::vector<double> p(test_lines), y(test_lines);
      data::CtrExample e;
      for (std::uint64_t i = 0; i < test_lines; ++i) {
        g.example(i, e);
        p[i] = g.model().probability(e);
        y[i] = e.label;
      }
      const auto m = flotilla::binary_metrics(std::span<const double>(p), std::span<const double>(y));
      std::cout << "planted model on the test lines: auc " << m.auc << ", log_loss " << m.log_loss
                << ", click rate " << m.observed_rate << " (mean probability " << m.mean_predicted << ")\n";
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const flotilla::ConfigError& e) {
    std::cerr << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "flotilla-ctr-generate: " << e.what() << "\n";
    return 1;
  }
}
