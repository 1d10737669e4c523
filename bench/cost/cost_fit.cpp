// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// flotilla_cost_fit: fits the cost model (topology/cost_model.hpp) to measured exchange steps and
// predicts larger jobs.
//
//   flotilla_cost_fit --measurements FILE [--link-gbit 10] [--model-gb 1] [--bucket-mib 25]
//                     [--worker-counts 64,128,256,512] [--server-counts 1,8,64] [--ranks-per-host 8]
//                     [--alpha-us A]
//
// --measurements FILE holds flotilla_exchange_step_bench's lines (bench/cluster_cost.sh collects them).
// Prints JSON lines: the fitted prices ({"prices":...}); every measured point with its prediction
// and relative error ({"point":...}); and, with the fitted per-message and memory prices but
// links of --link-gbit, the predicted exchange of a --model-gb GB model in buckets of --bucket-mib
// MiB for each number of workers: the ring, the hierarchical sum with --ranks-per-host ranks a
// host, and each number of parameter servers ({"predict":...}). bench/cost_model.py turns them
// into docs/cost_model.md's table and plot.
#include <flotilla/cli/flags.hpp>
#include <flotilla/core/error.hpp>
#include <flotilla/topology/cost_model.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "../../examples/flag_help.hpp"

namespace {

namespace cost = flotilla::cost;

/// The text of `key`'s value in a flat JSON object (a number, or a string without its quotes).
std::string field(const std::string& line, const std::string& key, std::size_t number) {
  const std::string quoted = "\"" + key + "\":";
  const std::size_t at = line.find(quoted);
  if (at == std::string::npos)
    throw flotilla::ConfigError("measurements line " + std::to_string(number) + " has no \"" + key + "\"");
  std::size_t begin = at + quoted.size();
  if (begin < line.size() && line[begin] == '"') {
    const std::size_t end = line.find('"', begin + 1);
    return line.substr(begin + 1, end - begin - 1);
  }
  std::size_t end = begin;
  while (end < line.size() && line[end] != ',' && line[end] != '}') ++end;
  return line.substr(begin, end - begin);
}

struct Point {
  std::string exchange, codec;
  cost::Layout layout;
  cost::Payload payload;
  double mib = 0, seconds = 0;
};

cost::Exchange exchange_of(const std::string& name, std::size_t number) {
  if (name == "ring") return cost::Exchange::ring;
  if (name == "hierarchical") return cost::Exchange::hierarchical;
  if (name == "parameter_servers") return cost::Exchange::parameter_servers;
  throw flotilla::ConfigError("measurements line " + std::to_string(number) + ": unknown exchange '" + name + "'");
}

std::vector<std::size_t> numbers(const std::string& list) {
  std::vector<std::size_t> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(std::stoul(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    flotilla::cli::Flags flags("flotilla_cost_fit", "fits the exchange cost model to measurements and predicts larger jobs");
    auto& link = flags.add<double>("link-gbit", 10, "predictions: link rate, Gbit/s");
    auto& model_gb = flags.add<double>("model-gb", 1, "predictions: GB of fp32 parameters");
    auto& bucket_mib = flags.add<double>("bucket-mib", 25, "predictions: MiB a ring bucket");
    auto& workers_list = flags.add<std::string>("worker-counts", "64,128,256,512", "worker counts, comma-separated");
    auto& servers_list = flags.add<std::string>("server-counts", "1,8,64", example::flag_help::server_counts);
    auto& per_host = flags.add<std::size_t>("ranks-per-host", 8, example::flag_help::ranks_per_host);
    auto& alpha_us = flags.add<double>("alpha-us", -1,
                                       "predictions: microseconds a message (default: the fitted price; links without "
                                       "delay, as the emulated ones, cannot show a real network's)");
    auto& path = flags.add<std::string>("measurements", "", "flotilla_exchange_step_bench's JSON lines");
    if (!flags.parse(argc, argv, std::cout)) return 0;
    if (path.empty()) throw flotilla::ConfigError("--measurements is required");
    std::ifstream in(path);
    if (!in) throw flotilla::ConfigError("cannot read " + path);
    std::vector<Point> points;
    std::size_t number = 0;
    for (std::string line; std::getline(in, line);) {
      ++number;
      if (line.empty() || line[0] != '{') continue;
      Point p;
      p.exchange = field(line, "exchange", number);
      p.codec = field(line, "codec", number);
      p.layout = {exchange_of(p.exchange, number), std::stoul(field(line, "workers", number)),
                  std::stoul(field(line, "ranks_per_host", number)), std::stoul(field(line, "servers", number))};
      p.payload = {std::stod(field(line, "values", number)), std::stod(field(line, "wire_bytes", number)),
                   std::stod(field(line, "buckets", number))};
      p.mib = std::stod(field(line, "mib", number));
      p.seconds = std::stod(field(line, "seconds", number));
      points.push_back(p);
    }
    std::vector<cost::Measurement> measured;
    for (const auto& p : points) measured.push_back({cost::terms(p.layout, p.payload), p.seconds});
    const cost::Prices prices = cost::fit(measured);
    std::printf("{\"prices\":{\"alpha\":%.6g,\"beta\":%.6g,\"gamma\":%.6g},\"points\":%zu}\n", prices.alpha, prices.beta,
                prices.gamma, points.size());
    for (const auto& p : points) {
      const double predicted = cost::seconds(p.layout, p.payload, prices);
      std::printf("{\"point\":{\"exchange\":\"%s\",\"workers\":%zu,\"ranks_per_host\":%zu,\"servers\":%zu,\"codec\":\"%s\","
                  "\"mib\":%g,\"measured\":%.6f,\"predicted\":%.6f,\"error\":%.4f}}\n",
                  p.exchange.c_str(), p.layout.workers, p.layout.ranks_per_host, p.layout.servers, p.codec.c_str(), p.mib,
                  p.seconds, predicted, predicted / p.seconds - 1);
    }
    cost::Prices at_scale = prices;
    at_scale.beta = 8 / (link * 1e9);
    if (alpha_us >= 0) at_scale.alpha = alpha_us * 1e-6;
    const double values = model_gb * 1e9 / 4, buckets = std::ceil(model_gb * 1e9 / (bucket_mib * 1048576));
    for (const std::size_t n : numbers(workers_list)) {
      const cost::Payload payload{values, 4, buckets};
      const auto print = [&](const char* kind, const cost::Layout& layout) {
        const cost::Terms t = cost::terms(layout, payload);
        std::printf("{\"predict\":{\"exchange\":\"%s\",\"workers\":%zu,\"servers\":%zu,\"ranks_per_host\":%zu,"
                    "\"alpha\":%.3g,\"seconds\":%.4f,\"latency_seconds\":%.4f,\"link_seconds\":%.4f,\"memory_seconds\":%.4f}}\n",
                    kind, n, layout.servers, layout.ranks_per_host, at_scale.alpha, cost::seconds(t, at_scale), t.messages * at_scale.alpha,
                    t.link_bytes * at_scale.beta, t.local_bytes * at_scale.gamma);
      };
      print("ring", {cost::Exchange::ring, n, 1, 0});
      if (n % per_host == 0) print("hierarchical", {cost::Exchange::hierarchical, n, per_host, 0});
      for (const std::size_t s : numbers(servers_list)) print("parameter_servers", {cost::Exchange::parameter_servers, n, 1, s});
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flotilla_cost_fit: %s\n", e.what());
    return 1;
  }
}
