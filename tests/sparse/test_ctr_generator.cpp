// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The synthetic click-log generator (data/ctr_generator.hpp) and the binary-classification
// metrics it is judged with (train/binary_metrics.hpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/data/ctr_generator.hpp"
#include "flotilla/train/binary_metrics.hpp"

namespace {

using flotilla::BinaryMetrics;
using flotilla::binary_metrics;
namespace data = flotilla::data;

BinaryMetrics metrics(const std::vector<double>& p, const std::vector<double>& y) {
  return binary_metrics(std::span<const double>(p), std::span<const double>(y));
}

// The AUC by its definition: every (positive, negative) pair, a tie worth one half.
double pairwise_auc(const std::vector<double>& p, const std::vector<double>& y) {
  double credit = 0, pairs = 0;
  for (std::size_t i = 0; i < p.size(); ++i)
    for (std::size_t j = 0; j < p.size(); ++j)
      if (y[i] == 1 && y[j] == 0) {
        pairs += 1;
        credit += p[i] > p[j] ? 1.0 : (p[i] == p[j] ? 0.5 : 0.0);
      }
  return credit / pairs;
}

// Average precision by its definition, threshold by threshold: at each distinct score t (highest
// first) precision and recall of "score >= t", weighted by the recall gained.
double thresholdwise_ap(const std::vector<double>& p, const std::vector<double>& y) {
  std::set<double, std::greater<>> thresholds(p.begin(), p.end());
  double positives = 0;
  for (double v : y) positives += v;
  double ap = 0, last_recall = 0;
  for (double t : thresholds) {
    double tp = 0, predicted = 0;
    for (std::size_t i = 0; i < p.size(); ++i)
      if (p[i] >= t) {
        predicted += 1;
        tp += y[i];
      }
    const double recall = tp / positives;
    ap += (recall - last_recall) * (tp / predicted);
    last_recall = recall;
  }
  return ap;
}

// A minimal Criteo line parser for these tests: the format as the generator promises it, checked
// strictly (40 tab-separated columns, 0/1 label, empty or decimal counts, empty or 8 lowercase hex
// digits), into the example a reader with the default transform produces.
data::CtrExample parse_criteo_line(std::string_view line, std::uint64_t number) {
  std::vector<std::string_view> cols;
  std::size_t start = 0;
  for (;;) {
    const auto tab = line.find('\t', start);
    cols.push_back(line.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start));
    if (tab == std::string_view::npos) break;
    start = tab + 1;
  }
  INFO("line " << number << ": " << line);
  REQUIRE(cols.size() == 1 + data::criteo_dense_features + data::criteo_categorical_fields);
  data::CtrExample e;
  REQUIRE((cols[0] == "0" || cols[0] == "1"));
  e.label = cols[0] == "1" ? 1.0f : 0.0f;
  for (std::size_t j = 0; j < data::criteo_dense_features; ++j) {
    const auto c = cols[1 + j];
    if (c.empty()) {
      e.dense.push_back(0.0f);
      continue;
    }
    REQUIRE(std::all_of(c.begin(), c.end(), [](char ch) { return ch >= '0' && ch <= '9'; }));
    const double x = std::stod(std::string(c));
    e.dense.push_back(static_cast<float>(std::log1p(std::max(x, 0.0))));
  }
  e.offsets.push_back(0);
  for (std::size_t f = 0; f < data::criteo_categorical_fields; ++f) {
    const auto c = cols[1 + data::criteo_dense_features + f];
    if (!c.empty()) {
      REQUIRE(c.size() == 8);
      REQUIRE(std::all_of(c.begin(), c.end(), [](char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'); }));
      e.ids.push_back(std::stoull(std::string(c), nullptr, 16));
    }
    e.offsets.push_back(static_cast<std::uint32_t>(e.ids.size()));
  }
  e.line = number;
  return e;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream is(text);
  for (std::string l; std::getline(is, l);) out.push_back(l);
  return out;
}

std::string generate(const data::CtrGeneratorOptions& o) {
  std::ostringstream os;
  data::write_criteo(o, os);
  return os.str();
}

data::CtrGeneratorOptions small(std::uint64_t lines, std::uint64_t seed = 7) {
  data::CtrGeneratorOptions o;
  o.lines = lines;
  o.seed = seed;
  return o;
}

}  // namespace

// ---- metrics --------------------------------------------------------------------------------

TEST_CASE("AUC and average precision match hand-computed values without ties") {
  // Scikit-learn's documentation example: roc_auc_score 0.75, average_precision_score 0.8333,
  // both derived by hand here.
  // By hand: the positive at 0.8 beats both negatives, the one at 0.35 beats 0.1 but not 0.4: 3/4.
  // Thresholds 0.8 (P 1, R 1/2) and 0.35 (P 2/3, R 1) gain recall: AP = 1/2 + 1/2 * 2/3.
  const auto m = metrics({0.1, 0.4, 0.35, 0.8}, {0, 0, 1, 1});
  CHECK(m.auc == doctest::Approx(0.75).epsilon(1e-12));
  CHECK(m.average_precision == doctest::Approx(5.0 / 6.0).epsilon(1e-12));
  CHECK(m.count == 4);
  CHECK(m.positives == 2);
  CHECK(m.observed_rate == doctest::Approx(0.5));
  CHECK(m.mean_predicted == doctest::Approx((0.1 + 0.4 + 0.35 + 0.8) / 4));
}

TEST_CASE("tied scores give half credit in the AUC and enter average precision together") {
  // Positives at 0.5 and 0.2, negatives at 0.5, 0.5, 0.9. AUC: the positive at 0.5 ties two
  // negatives (2 * 1/2), nothing else wins: 1 / 6. AP: threshold 0.9 gains no recall; 0.5 admits
  // one positive and two negatives at once (P 1/4, R 1/2); 0.2 (P 2/5, R 1): 1/8 + 1/5 = 0.325.
  const auto m = metrics({0.5, 0.5, 0.5, 0.2, 0.9}, {1, 0, 0, 1, 0});
  CHECK(m.auc == doctest::Approx(1.0 / 6.0).epsilon(1e-12));
  CHECK(m.average_precision == doctest::Approx(0.325).epsilon(1e-12));

  // Every score equal: the AUC of a coin, and AP the share of positives (one threshold).
  const auto flat = metrics({0.3, 0.3, 0.3, 0.3, 0.3}, {1, 0, 0, 1, 0});
  CHECK(flat.auc == doctest::Approx(0.5).epsilon(1e-12));
  CHECK(flat.average_precision == doctest::Approx(0.4).epsilon(1e-12));
}

TEST_CASE("a perfect ranking has AUC 1 and AP 1, a reversed one AUC 0") {
  const auto good = metrics({0.9, 0.8, 0.2, 0.1}, {1, 1, 0, 0});
  CHECK(good.auc == 1.0);
  CHECK(good.average_precision == 1.0);
  const auto bad = metrics({0.1, 0.2, 0.8, 0.9}, {1, 1, 0, 0});
  CHECK(bad.auc == 0.0);
  // Thresholds 0.2 (P 1/3, R 1/2) and 0.1 (P 2/4, R 1): 1/6 + 1/4.
  CHECK(bad.average_precision == doctest::Approx(1.0 / 6.0 + 0.25).epsilon(1e-12));
}

TEST_CASE("the AUC equals the pair count and AP the threshold-by-threshold sum on random data") {
  flotilla::Generator g(42);
  for (int round = 0; round < 6; ++round) {
    const std::size_t n = 200 + 97 * static_cast<std::size_t>(round);
    std::vector<double> p(n), y(n);
    for (std::size_t i = 0; i < n; ++i) {
      // Few distinct values on even rounds, so that ties are common.
      const double u = g.uniform<double>();
      p[i] = round % 2 == 0 ? std::floor(u * 12) / 12 : u;
      y[i] = g.uniform<double>() < 0.2 + 0.6 * p[i] ? 1 : 0;
    }
    const auto m = metrics(p, y);
    CHECK(m.auc == doctest::Approx(pairwise_auc(p, y)).epsilon(1e-12));
    CHECK(m.average_precision == doctest::Approx(thresholdwise_ap(p, y)).epsilon(1e-12));

    std::vector<float> pf(p.begin(), p.end()), yf(y.begin(), y.end());
    const auto mf = binary_metrics(std::span<const float>(pf), std::span<const float>(yf));
    if (round % 2 == 0) {  // the grid's values order the same in float: identical ranking
      CHECK(mf.auc == m.auc);
      CHECK(mf.average_precision == m.average_precision);
    }
    CHECK(mf.positives == m.positives);
  }
}

TEST_CASE("the log loss is the mean negative log-likelihood with probabilities clamped to [1e-7, 1 - 1e-7]") {
  const auto m = metrics({0.9, 0.2, 0.6}, {1, 0, 0});
  CHECK(m.log_loss == doctest::Approx(-(std::log(0.9) + std::log(0.8) + std::log(0.4)) / 3).epsilon(1e-12));

  // A certain mistake costs -log(1e-7), not infinity; a certain hit costs -log(1 - 1e-7).
  const auto wrong = metrics({0.0, 1.0}, {1, 0});
  CHECK(wrong.log_loss == doctest::Approx(-std::log(1e-7)).epsilon(1e-9));
  const auto right = metrics({1.0, 0.0}, {1, 0});
  CHECK(right.log_loss == doctest::Approx(-std::log1p(-1e-7)).epsilon(1e-9));
  CHECK(right.log_loss > 0);
}

TEST_CASE("undefined metrics are NaN: the AUC with one class, AP without positives, everything on no data") {
  const auto negatives = metrics({0.2, 0.7}, {0, 0});
  CHECK(std::isnan(negatives.auc));
  CHECK(std::isnan(negatives.average_precision));
  CHECK(negatives.observed_rate == 0.0);
  CHECK(std::isfinite(negatives.log_loss));

  const auto positives = metrics({0.2, 0.7}, {1, 1});
  CHECK(std::isnan(positives.auc));
  CHECK(positives.average_precision == 1.0);

  const auto none = metrics({}, {});
  CHECK(none.count == 0);
  CHECK(std::isnan(none.auc));
  CHECK(std::isnan(none.log_loss));
  CHECK(std::isnan(none.mean_predicted));
}

TEST_CASE("binary_metrics refuses mismatched sizes, probabilities outside [0, 1] and labels other than 0 and 1") {
  CHECK_THROWS_AS(metrics({0.1, 0.2}, {1}), flotilla::ShapeError);
  CHECK_THROWS_WITH(metrics({0.1, 1.5}, {1, 0}), doctest::Contains("sample 1"));
  CHECK_THROWS_WITH(metrics({0.1, std::numeric_limits<double>::quiet_NaN()}, {1, 0}), doctest::Contains("sample 1"));
  CHECK_THROWS_WITH(metrics({0.1, 0.2, 0.3}, {1, 0, 2}), doctest::Contains("label 2"));
}

// ---- generator ------------------------------------------------------------------------------

TEST_CASE("the generated file depends only on the seed: same bytes twice, however it is split") {
  const auto whole = generate(small(3000));
  CHECK(whole == generate(small(3000)));
  CHECK(whole != generate(small(3000, 8)));

  auto head = small(1234);
  auto tail = small(3000 - 1234);
  tail.first_line = 1234;
  CHECK(generate(head) + generate(tail) == whole);
  // An example knows its line in the file that starts at first_line.
  data::CtrExample e;
  data::CtrGenerator(tail).example(1234 + 10, e);
  CHECK(e.line == 11);
  data::CtrGenerator(tail).example(3, e);
  CHECK(e.line == 0);

  // Threads format chunks side by side; the bytes stay the same (with a partial last round).
  auto threaded = small(3000);
  threaded.lines = 8192 * 4 + 77;
  auto serial = threaded;
  threaded.threads = 3;
  CHECK(generate(threaded) == generate(serial));
  CHECK(lines_of(whole).size() == 3000);
}

TEST_CASE("every generated line is a valid Criteo line, and parses to the example the generator reports") {
  const data::CtrGenerator g(small(2000));
  std::ostringstream os;
  g.write(os);
  const auto lines = lines_of(os.str());
  REQUIRE(lines.size() == 2000);
  data::CtrExample expected;
  std::size_t empty_ids = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto e = parse_criteo_line(lines[i], i + 1);
    g.example(i, expected);
    CHECK(e.label == expected.label);
    CHECK(e.dense == expected.dense);
    CHECK(e.offsets == expected.offsets);
    CHECK(e.ids == expected.ids);
    CHECK(expected.line == i + 1);
    empty_ids += data::criteo_categorical_fields - e.ids.size();
  }
  // Expected share of empty IDs: the mean of the default missing rates.
  double rate = 0;
  for (double r : data::default_ctr_missing_rate()) rate += r;
  rate /= static_cast<double>(data::criteo_categorical_fields);
  CHECK(static_cast<double>(empty_ids) / (2000.0 * 26) == doctest::Approx(rate).epsilon(0.05));
}

TEST_CASE("fields and dense features are missing at their configured rates") {
  auto o = small(20000);
  const data::CtrGenerator g(o);
  std::vector<double> missing(data::criteo_categorical_fields), dense_missing(data::criteo_dense_features);
  const auto lines = lines_of(generate(o));
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto e = parse_criteo_line(lines[i], i + 1);
    for (std::size_t f = 0; f < data::criteo_categorical_fields; ++f) missing[f] += e.field_ids(f).empty() ? 1 : 0;
    // An empty dense column is two tabs in a row (or a tab at the end, impossible here: 26 fields follow).
    std::size_t col = 0, start = 0;
    for (std::size_t k = 0; k <= lines[i].size() && col <= data::criteo_dense_features; ++k) {
      if (k == lines[i].size() || lines[i][k] == '\t') {
        if (col >= 1 && k == start) dense_missing[col - 1] += 1;
        ++col;
        start = k + 1;
      }
    }
  }
  const double n = static_cast<double>(lines.size());
  for (std::size_t f = 0; f < missing.size(); ++f) {
    const double r = o.missing_rate[f];
    INFO("field " << f);
    CHECK(std::abs(missing[f] / n - r) <= 4 * std::sqrt(r * (1 - r) / n) + 1e-12);
  }
  for (std::size_t j = 0; j < dense_missing.size(); ++j) {
    const double r = o.dense_missing_rate[j];
    INFO("dense feature " << j);
    CHECK(std::abs(dense_missing[j] / n - r) <= 4 * std::sqrt(r * (1 - r) / n) + 1e-12);
  }
}

TEST_CASE("IDs follow the Zipf law: rank 1 is drawn with probability 1 / H(n, s), and rank 1 over rank 2 is 2^s") {
  auto o = small(40000);
  for (auto& r : o.missing_rate) r = 0;
  const data::CtrGenerator g(o);
  data::CtrExample e;
  for (std::size_t f : {std::size_t{0}, std::size_t{12}, std::size_t{25}}) {
    const std::uint64_t n = o.vocabulary[f];
    double h = 0;
    for (std::uint64_t k = 1; k <= n; ++k) h += std::pow(static_cast<double>(k), -o.zipf);
    std::size_t first = 0, second = 0, tenth = 0;
    for (std::uint64_t i = 0; i < o.lines; ++i) {
      g.example(i, e);
      const auto id = e.field_ids(f)[0];
      first += id == g.id_of_rank(f, 1) ? 1 : 0;
      second += id == g.id_of_rank(f, 2) ? 1 : 0;
      tenth += id == g.id_of_rank(f, 10) ? 1 : 0;
    }
    INFO("field " << f << " with " << n << " IDs");
    const double lines = static_cast<double>(o.lines);
    const double p1 = 1.0 / h, p2 = std::pow(2.0, -o.zipf) / h, p10 = std::pow(10.0, -o.zipf) / h;
    CHECK(std::abs(first / lines - p1) <= 4 * std::sqrt(p1 * (1 - p1) / lines));
    CHECK(std::abs(second / lines - p2) <= 4 * std::sqrt(p2 * (1 - p2) / lines));
    CHECK(std::abs(tenth / lines - p10) <= 4 * std::sqrt(p10 * (1 - p10) / lines));
    CHECK(first > 5 * tenth);
  }
}

TEST_CASE("the click rate is near the configured one and labels agree with the planted probabilities") {
  const data::CtrGenerator g(small(30000));
  data::CtrExample e;
  std::vector<double> p, y;
  for (std::uint64_t i = 0; i < g.options().lines; ++i) {
    g.example(i, e);
    p.push_back(g.model().probability(e));
    y.push_back(e.label);
  }
  const auto m = metrics(p, y);
  CHECK(m.observed_rate > 0.2);
  CHECK(m.observed_rate < 0.3);
  // The bias was set on another sample, so the mean probability is near, not at, the target.
  CHECK(m.mean_predicted == doctest::Approx(0.25).epsilon(0.04));
  // Given the probabilities, the number of clicks has variance sum p(1 - p).
  double var = 0;
  for (double v : p) var += v * (1 - v);
  CHECK(std::abs(m.observed_rate - m.mean_predicted) * 30000 <= 4 * std::sqrt(var));
  // Calibration by decile of the probability: each bin's click rate follows its mean probability.
  std::vector<std::size_t> order(p.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return p[a] < p[b]; });
  for (std::size_t bin = 0; bin < 10; ++bin) {
    double sp = 0, sy = 0, sv = 0;
    for (std::size_t k = bin * 3000; k < (bin + 1) * 3000; ++k) {
      sp += p[order[k]];
      sy += y[order[k]];
      sv += p[order[k]] * (1 - p[order[k]]);
    }
    INFO("decile " << bin);
    CHECK(std::abs(sy - sp) <= 4 * std::sqrt(sv));
  }
  // The planted model separates clicks well, with room for a learned model below it.
  CHECK(m.auc > 0.75);
  CHECK(m.auc < 0.83);
}

TEST_CASE("the planted model reads examples as a reader produces them from the text") {
  const data::CtrGenerator g(small(500));
  const auto lines = lines_of(generate(g.options()));
  data::CtrExample e;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto parsed = parse_criteo_line(lines[i], i + 1);
    g.example(i, e);
    CHECK(g.model().logit(parsed) == g.model().logit(e));
    // By hand: the bias, the IDs' weights, the dense weights times log1p of the counts.
    double z = g.model().bias();
    for (std::size_t f = 0; f < data::criteo_categorical_fields; ++f)
      for (auto id : parsed.field_ids(f)) z += g.model().field_weight(f, id);
    for (std::size_t j = 0; j < data::criteo_dense_features; ++j) z += g.model().dense_weight(j) * parsed.dense[j];
    CHECK(g.model().logit(parsed) == doctest::Approx(z).epsilon(1e-12));
  }
  // An ID's value multiplies its weight.
  auto weighted = e;
  weighted.values.assign(weighted.ids.size(), 2.0f);
  double ids_part = 0;
  for (std::size_t f = 0; f < data::criteo_categorical_fields; ++f)
    for (auto id : e.field_ids(f)) ids_part += g.model().field_weight(f, id);
  CHECK(g.model().logit(weighted) - g.model().logit(e) == doctest::Approx(ids_part).epsilon(1e-9));

  auto short_example = e;
  short_example.dense.pop_back();
  CHECK_THROWS_AS((void)g.model().logit(short_example), flotilla::ShapeError);
}

TEST_CASE("ID weights are defined for any ID, fixed by the seed, centred, with the configured spread") {
  const auto o = small(1);
  const data::PlantedCtrModel a(o), b(o);
  auto o2 = o;
  o2.seed = 8;
  const data::PlantedCtrModel c(o2);
  double sum = 0, sq = 0;
  const std::size_t n = 100000;
  std::size_t differ = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t id = 0xffffffffULL - i * 40503;
    const double w = a.field_weight(i % 26, id);
    CHECK(w == b.field_weight(i % 26, id));
    differ += w != c.field_weight(i % 26, id) ? 1 : 0;
    sum += w;
    sq += w * w;
  }
  CHECK(differ > n - 10);
  const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  CHECK(std::abs(mean) < 4 * o.categorical_weight_scale / std::sqrt(double(n)));
  CHECK(sd == doctest::Approx(o.categorical_weight_scale).epsilon(0.02));
  // An explicit bias replaces the calibrated one and nothing else.
  auto fixed = o;
  fixed.bias = -3.5;
  const data::PlantedCtrModel d(fixed);
  CHECK(d.bias() == -3.5);
  CHECK(d.field_weight(3, 12345) == a.field_weight(3, 12345));
}

TEST_CASE("a held-out stream has the same planted model and other lines") {
  const auto train = small(2000);
  const auto test = train.held_out(2000);
  const data::CtrGenerator gt(train), gh(test);
  CHECK(gt.model().bias() == gh.model().bias());
  const auto a = lines_of(generate(train)), b = lines_of(generate(test));
  REQUIRE(a.size() == b.size());
  std::size_t same = 0;
  for (std::size_t i = 0; i < a.size(); ++i) same += a[i] == b[i] ? 1 : 0;
  CHECK(same < 20);  // only lines made of the commonest values can coincide
  // The planted model ranks held-out lines as well as training lines.
  data::CtrExample e;
  std::vector<double> p, y;
  const data::CtrGenerator big(test.held_out(20000));
  for (std::uint64_t i = 0; i < 20000; ++i) {
    big.example(i, e);
    p.push_back(big.model().probability(e));
    y.push_back(e.label);
  }
  CHECK(metrics(p, y).auc > 0.75);
}

TEST_CASE("bad generator options and unwritable files raise errors that name them") {
  auto o = small(10);
  o.vocabulary.pop_back();
  CHECK_THROWS_WITH_AS(data::CtrGenerator{o}, doctest::Contains("vocabulary has 25 entries"), flotilla::ConfigError);
  o = small(10);
  o.vocabulary[4] = 0;
  CHECK_THROWS_WITH_AS(data::CtrGenerator{o}, doctest::Contains("vocabulary[4]"), flotilla::ConfigError);
  o = small(10);
  o.zipf = 0;
  CHECK_THROWS_WITH_AS(data::CtrGenerator{o}, doctest::Contains("zipf"), flotilla::ConfigError);
  o = small(10);
  o.missing_rate[3] = 1.5;
  CHECK_THROWS_WITH_AS(data::CtrGenerator{o}, doctest::Contains("missing_rate[3] is 1.5"), flotilla::ConfigError);
  o = small(10);
  o.click_rate = 1;
  CHECK_THROWS_WITH_AS(data::PlantedCtrModel{o}, doctest::Contains("click_rate"), flotilla::ConfigError);
  o = small(10);
  o.dense_tail[2] = -1;
  CHECK_THROWS_WITH_AS(data::CtrGenerator{o}, doctest::Contains("dense_tail[2]"), flotilla::ConfigError);

  const auto dir = std::filesystem::temp_directory_path() / "flotilla_ctr_generator_missing_dir";
  std::filesystem::remove_all(dir);
  CHECK_THROWS_WITH_AS(data::write_criteo(small(10), dir / "x.txt"), doctest::Contains("flotilla_ctr_generator_missing_dir"),
                       flotilla::DataError);

  std::ostringstream closed;
  closed.setstate(std::ios::badbit);
  CHECK_THROWS_AS(data::write_criteo(small(10), closed), flotilla::DataError);
}

TEST_CASE("write_criteo to a file writes the same bytes as to a stream") {
  const auto path = std::filesystem::temp_directory_path() / "flotilla_ctr_generator_test.txt";
  data::write_criteo(small(700), path);
  std::ifstream is(path, std::ios::binary);
  std::stringstream ss;
  ss << is.rdbuf();
  CHECK(ss.str() == generate(small(700)));
  std::filesystem::remove(path);
}
