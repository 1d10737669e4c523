// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// flotilla_ctr_server_load: each parameter server's share of the embedding keys served in one
// epoch of sparse::Trainer, by replaying the keys the workers would pull, without training.
//
//   flotilla_ctr_server_load --train train.tsv --workers 4 --batch 256 --server-counts 1,2,4
//   flotilla_ctr_server_load --lines 100000 --zipf 2 ...     lines drawn in memory instead
//
// It forms the batches as the trainer does (sparse::detail::epoch_order's permutation, each worker
// its contiguous part of every global batch), builds each worker's EmbeddingLookup (the distinct
// keys of its batch), and charges every key to owner_of(key, servers): what RowServerCounters::
// keys_pulled (and keys_pushed, the same keys) would count on each server over the epoch's
// training steps. One JSON line per server count:
//
//   {"servers": 2, "keys_per_step": ..., "keys": [k0, k1], "shares": [s0, s1], "hottest_share": ...,
//    "hottest_over_mean": ..., "rows": [r0, r1], "row_shares": [...]}
//
// worker_keys_per_step: each worker's mean of distinct keys per step, what examples/ctr reports as
// rows_per_step (one worker's), by which a replay is checked against the run it stands for.
// keys: keys served per server over the epoch (all workers); rows: distinct rows each server holds
// at the end of the epoch (its memory); id_shares: the shares of the IDs behind the keys, before a
// worker coalesces a batch's repeated IDs into one key (what a server without that would see).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "flotilla/cli/flags.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/data/criteo.hpp"
#include "flotilla/data/ctr_generator.hpp"
#include "flotilla/data/ctr_reader.hpp"
#include "flotilla/nn/embedding.hpp"
#include "flotilla/sparse/row_table.hpp"
#include "flotilla/sparse/trainer.hpp"
#include "../../examples/flag_help.hpp"

namespace {

namespace fl = flotilla;

std::vector<std::size_t> parse_counts(const std::string& text) {
  std::vector<std::size_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::size_t used = 0;
    unsigned long long v = 0;
    try {
      v = std::stoull(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || item.empty() || v == 0 || v > 4096)
      throw fl::ConfigError("--server-counts: '" + item + "' in '" + text + "' is not a server count in [1, 4096]");
    out.push_back(static_cast<std::size_t>(v));
  }
  if (out.empty()) throw fl::ConfigError("--server-counts: no server counts in '" + text + "'");
  return out;
}

void print_array(const std::vector<double>& v, int digits) {
  std::printf("[");
  for (std::size_t i = 0; i < v.size(); ++i) std::printf("%s%.*f", i ? ", " : "", digits, v[i]);
  std::printf("]");
}

int run(int argc, char** argv) {
  fl::cli::Flags flags("flotilla_ctr_server_load",
                       "each parameter server's share of the embedding keys one epoch of sparse::Trainer serves");
  auto& train = flags.add<std::filesystem::path>("train", {}, example::flag_help::train);
  auto& lines = flags.add<std::uint64_t>("lines", 0, example::flag_help::lines);
  auto& zipf = flags.add<double>("zipf", fl::data::CtrGeneratorOptions{}.zipf, "with --lines: Zipf exponent of the IDs");
  auto& workers = flags.add<std::size_t>("workers", 4, example::flag_help::workers);
  auto& batch = flags.add<std::size_t>("batch", 256, example::flag_help::batch);
  auto& servers_text = flags.add<std::string>("server-counts", "1,2,4", example::flag_help::server_counts);
  auto& seed = flags.add<std::uint64_t>("seed", 1, example::flag_help::seed);
  flags.at_least("workers", 1).at_least("batch", 1);
  if (!flags.parse(argc, argv, std::cout)) return 0;
  if (train.empty() == (lines == 0)) throw fl::ConfigError("give either --train FILE or --lines N (see --help)");
  const auto counts = parse_counts(servers_text);

  std::vector<fl::data::CtrExample> examples;
  if (!train.empty()) {
    examples = fl::data::read_ctr_file<fl::data::CriteoFormat>(train.string(), fl::data::ReaderOptions{});
  } else {
    fl::data::CtrGeneratorOptions o;
    o.seed = seed;
    o.lines = lines;
    o.zipf = zipf;
    const fl::data::CtrGenerator g(o);  // validates the options
    examples.resize(lines);
    for (std::uint64_t i = 0; i < lines; ++i) g.example(i, examples[i]);
  }
  const std::size_t W = workers, B = batch, global_batch = W * B;
  if (examples.size() < global_batch)
    throw fl::ConfigError((train.empty() ? std::string("--lines") : train.string()) + ": " + std::to_string(examples.size()) + " examples, fewer than one global batch of " +
                          std::to_string(global_batch));
  const std::size_t steps = examples.size() / global_batch;
  const auto order = fl::sparse::detail::epoch_order(examples.size(), seed, 0);

  // keys[c][s]: keys served by server s of counts[c] servers.
  // uses[c][s]: the IDs behind them, before the worker coalesces repeats into one key each.
  std::vector<std::vector<double>> keys(counts.size()), uses(counts.size());
  for (std::size_t c = 0; c < counts.size(); ++c) {
    keys[c].assign(counts[c], 0.0);
    uses[c].assign(counts[c], 0.0);
  }
  std::vector<double> per_key;
  std::unordered_set<std::uint64_t> rows;
  fl::EmbeddingLookup lookup;
  std::vector<fl::data::CtrExample> part;
  double total = 0, total_uses = 0;
  std::vector<double> per_worker(W, 0.0);
  for (std::size_t s = 0; s < steps; ++s) {
    for (std::size_t w = 0; w < W; ++w) {
      part.clear();
      for (std::size_t i = 0; i < B; ++i) part.push_back(examples[order[s * global_batch + w * B + i]]);
      lookup.build(part, 0, fl::data::criteo_categorical_fields, 0);
      total += static_cast<double>(lookup.keys.size());
      per_worker[w] += static_cast<double>(lookup.keys.size());
      total_uses += static_cast<double>(lookup.slots.size());
      per_key.assign(lookup.keys.size(), 0.0);
      for (const auto slot : lookup.slots) per_key[slot] += 1;
      for (std::size_t j = 0; j < lookup.keys.size(); ++j) {
        const auto k = lookup.keys[j];
        rows.insert(k);
        for (std::size_t c = 0; c < counts.size(); ++c) {
          const std::size_t owner = fl::sparse::owner_of(k, counts[c]);
          keys[c][owner] += 1;
          uses[c][owner] += per_key[j];
        }
      }
    }
  }
  for (std::size_t c = 0; c < counts.size(); ++c) {
    const std::size_t S = counts[c];
    std::vector<double> held(S, 0.0), shares(S), row_shares(S), use_shares(S);
    for (const auto k : rows) held[fl::sparse::owner_of(k, S)] += 1;
    for (std::size_t i = 0; i < S; ++i) {
      shares[i] = keys[c][i] / total;
      use_shares[i] = uses[c][i] / total_uses;
      row_shares[i] = held[i] / static_cast<double>(rows.size());
    }
    const double hottest = *std::max_element(shares.begin(), shares.end());
    std::printf("{\"servers\": %zu, \"workers\": %zu, \"batch\": %zu, \"steps\": %zu, \"keys_per_step\": %.1f, "
                "\"worker_keys_per_step\": ", S, W, B, steps, total / static_cast<double>(steps * W));
    std::vector<double> means(per_worker);
    for (auto& m : means) m /= static_cast<double>(steps);
    print_array(means, 1);
    std::printf(", \"keys\": ");
    print_array(keys[c], 0);
    std::printf(", \"shares\": ");
    print_array(shares, 4);
    std::printf(", \"hottest_share\": %.4f, \"hottest_over_mean\": %.3f, \"rows\": ", hottest, hottest * static_cast<double>(S));
    print_array(held, 0);
    std::printf(", \"row_shares\": ");
    print_array(row_shares, 4);
    std::printf(", \"id_shares\": ");
    print_array(use_shares, 4);
    std::printf(", \"ids_per_key\": %.2f", total_uses / total);
    std::printf("}\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const flotilla::ConfigError& e) {
    std::cerr << "flotilla_ctr_server_load: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "flotilla_ctr_server_load: " << e.what() << "\n";
    return 1;
  }
}
