// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The reproducible sum: SumTree's shape, tree_allreduce's bits and bytes, and policy::Reproducible's
// training, which must give the same parameters, bit for bit, for any number of workers and cores.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "../common/blobs.hpp"
#include "../common/quiet_fit.hpp"
#include "../common/reproducible_run.hpp"
#include "flotilla/collective/sum_tree.hpp"
#include "flotilla/collective/tree_allreduce.hpp"
#include "flotilla/flotilla.hpp"
#include "flotilla/policy/reproducible.hpp"
#include "flotilla/transport/in_process.hpp"

namespace unit_reproducible {

using namespace flotilla;
using collective::SumTree;
using collective::TreeNode;

namespace {

// Values over many binades, so that any change in the order of the additions shows in the bits.
float leaf_value(std::size_t leaf, std::size_t i) {
  const std::uint64_t h = (leaf * 0x9E3779B97F4A7C15ull) ^ (i * 0xC2B2AE3D27D4EB4Full);
  const std::uint64_t m = h ^ (h >> 29);
  const float mantissa = static_cast<float>(m % 1000003) / 1000003.0f - 0.5f;
  return std::ldexp(mantissa, static_cast<int>((m >> 20) % 24) - 12);
}

/// The tree's sum done by hand, recursively, in one place.
std::vector<float> tree_sum(TreeNode node, std::size_t p) {
  std::vector<float> v(p);
  if (node.leaf()) {
    for (std::size_t i = 0; i < p; ++i) v[i] = leaf_value(node.begin, i);
    return v;
  }
  const auto l = tree_sum(SumTree::left(node), p), r = tree_sum(SumTree::right(node), p);
  for (std::size_t i = 0; i < p; ++i) v[i] = l[i] + r[i];
  return v;
}

/// A node's value as one rank computes it from its leaves.
std::vector<float> node_value(TreeNode node, std::size_t p) { return tree_sum(node, p); }

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

}  // namespace

TEST_CASE("SumTree: the cover of a run is its largest nodes, and the covers of the ranks hold every leaf once") {
  const SumTree tree(24);
  CHECK(SumTree::left({0, 24}) == TreeNode{0, 12});
  CHECK(SumTree::right({0, 7}) == TreeNode{4, 7});
  CHECK(tree.cover({0, 24}) == std::vector<TreeNode>{{0, 24}});
  CHECK(tree.cover({0, 12}) == std::vector<TreeNode>{{0, 12}});
  // 3 ranks: [0, 8) is the node [0, 6) and the node [6, 8) of [6, 12) = [6, 9) + [9, 12).
  CHECK(tree.cover({0, 8}) == std::vector<TreeNode>{{0, 6}, {6, 8}});
  CHECK(tree.cover({8, 16}) == std::vector<TreeNode>{{8, 9}, {9, 12}, {12, 15}, {15, 16}});
  CHECK(tree.cover({5, 5}).empty());
  CHECK_THROWS_AS(tree.cover({3, 25}), ConfigError);
  for (std::size_t leaves : {1u, 2u, 7u, 24u, 25u}) {
    const SumTree t(leaves);
    for (std::size_t n = 1; n <= 9; ++n) {
      std::vector<int> seen(leaves, 0);
      for (std::size_t r = 0; r < n; ++r)
        for (const TreeNode node : t.cover(t.leaves_of(r, n))) {
          // Largest: the parent of a node reaches outside the rank's run (or it is the root).
          for (std::size_t l = node.begin; l < node.end; ++l) ++seen[l];
        }
      for (std::size_t l = 0; l < leaves; ++l) CHECK(seen[l] == 1);
    }
  }
}

TEST_CASE("tree_allreduce: the same bits as the tree added in one place, for 1 to 8 ranks; bytes equal the theory") {
  for (std::size_t leaves : {std::size_t{24}, std::size_t{7}, std::size_t{3}}) {
    for (std::size_t p : {std::size_t{0}, std::size_t{5}, std::size_t{1001}}) {
      const SumTree tree(leaves);
      const std::vector<float> expected = tree_sum(tree.root(), p);
      for (std::size_t n = 1; n <= 8; ++n) {
        CAPTURE(leaves);
        CAPTURE(p);
        CAPTURE(n);
        std::vector<std::vector<float>> out(n);
        std::vector<TrafficCounters> traffic(n);
        std::vector<std::size_t> node_count(n);
        transport::InProcess::run({}, n, [&](transport::InProcess::endpoint& e) {
          const auto nodes = tree.cover(tree.leaves_of(e.rank(), n));
          std::vector<std::vector<float>> values;
          for (const TreeNode node : nodes) values.push_back(node_value(node, p));
          std::vector<std::span<const float>> views(values.begin(), values.end());
          std::vector<float> sum(p, -1.0f);
          const TrafficCounters before = e.counters();
          collective::tree_allreduce(e, tree, std::span<const std::span<const float>>(views), std::span<float>(sum));
          traffic[e.rank()] = e.counters() - before;
          out[e.rank()] = std::move(sum);
          node_count[e.rank()] = nodes.size();
        });
        for (std::size_t r = 0; r < n; ++r) {
          CAPTURE(r);
          CHECK(same_bits(out[r], expected));
          // Each other rank's chunk of each of this rank's nodes, then the ring's allgather.
          std::size_t theory = 0;
          for (std::size_t o = 0; o < n; ++o) {
            if (o == r) continue;
            const auto [b, e] = detail::split_range(p, n, o);
            theory += node_count[r] * (e - b);
          }
          for (std::size_t s = 0; s + 1 < n; ++s) {
            const auto [b, e] = detail::split_range(p, n, (r + n - s) % n);
            theory += e - b;
          }
          CHECK(traffic[r].payload_bytes_sent == theory * sizeof(float));
        }
      }
    }
  }
}

TEST_CASE("tree_allreduce: a rank with the wrong nodes is told which it needed") {
  const SumTree tree(8);
  CHECK_THROWS_WITH_AS(transport::InProcess::run({}, 1,
                                                 [&](transport::InProcess::endpoint& e) {
                                                   std::vector<float> a(4), sum(4);
                                                   std::vector<std::span<const float>> two{a, a};
                                                   collective::tree_allreduce(e, tree, std::span<const std::span<const float>>(two),
                                                                              std::span<float>(sum));
                                                 }),
                       doctest::Contains("whose sum takes 1 nodes; it was given 2"), ConfigError);
}

namespace {

using flotilla_test::reproducible::fifty_steps;
using flotilla_test::reproducible::shards_of_two;

}  // namespace

TEST_CASE("policy::Reproducible: 50 steps give the same bits on 1, 2, 3, 4 and 8 workers, with 1 and 2 cores each") {
  const auto reference = fifty_steps(1, 1, 1, shards_of_two());
  for (std::size_t workers : {1u, 2u, 3u, 4u, 8u})
    for (std::size_t threads : {1u, 2u}) {
      CAPTURE(workers);
      CAPTURE(threads);
      CHECK(same_bits(fifty_steps(workers, workers, threads, shards_of_two()), reference));
    }
  // What it guards against: the ordinary synchronous sum, whose order follows the workers.
  const auto one = fifty_steps<policy::Synchronous<>>(1, 1, 1), three = fifty_steps<policy::Synchronous<>>(3, 3, 1);
  CHECK_FALSE(same_bits(one, three));
}

TEST_CASE("policy::Reproducible: a batch that virtual shards cannot divide, or statistics over the global batch, are refused") {
  policy::Reproducible shards;
  shards.shard_samples = 5;
  CHECK_THROWS_WITH_AS(fifty_steps(2, 2, 1, shards), doctest::Contains("multiple of shard_samples (5)"),
                       ConfigError);
  using SyncNet = Sequential<Input<1, 6, 6>, Conv2D<4, 3>, SyncBatchNorm2D, ReLU, Flatten, Dense<3>>;
  using MSync = Model<SyncNet, SoftmaxCrossEntropy, optim::Momentum, float>;
  TrainerOptions<MSync> o;
  o.batch_size = 8;
  o.workers = 2;
  Trainer<MSync, policy::Reproducible> t(o);
  CHECK_THROWS_WITH_AS(t.fit(flotilla_test::blobs<float>(64, 5), nullptr, flotilla_test::quiet(1)),
                       doctest::Contains("SyncBatchNorm"), ConfigError);
}

}  // namespace unit_reproducible
