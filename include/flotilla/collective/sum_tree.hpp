// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_COLLECTIVE_SUMTREE_HPP_INCLUDED
#define FLOTILLA_COLLECTIVE_SUMTREE_HPP_INCLUDED
// SumTree: one fixed order in which to add up the gradients of a global batch's virtual shards,
// whoever computes them.
//
// Floating-point addition is not associative, so a sum's bits depend on the order of its terms.
// A ring allreduce adds chunk c in the order c+1, c+2, ... of the ranks, and a rank adds its cores'
// parts in core order: change the number of ranks or cores and the bits change. A SumTree fixes
// the order by the leaves alone: leaf i is shard i of the global batch, and every inner node is
// its left child plus its right child. The tree over L leaves is the same whatever computes it;
// a rank that holds a contiguous run of leaves adds up the largest nodes that lie wholly inside its
// run (cover()), and the nodes above them, which span several ranks, are added by
// collective::tree_allreduce in the same shape. So the root has the same bits for any number of
// ranks and cores.
//
// The shape: the root covers [0, L); a node of more than one leaf splits after ceil(size / 2)
// of them (left(), right()).
#include <cstddef>
#include <string>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/core/thread_pool.hpp"

namespace flotilla::collective {

/// A node of a SumTree: the leaves [begin, end).
struct TreeNode {
  std::size_t begin = 0;
  std::size_t end = 0;
  constexpr std::size_t size() const noexcept { return end - begin; }
  constexpr bool leaf() const noexcept { return end - begin == 1; }
  friend constexpr bool operator==(const TreeNode&, const TreeNode&) = default;
};

class SumTree {
 public:
  explicit SumTree(std::size_t leaves) : leaves_(leaves) {}

  std::size_t leaves() const noexcept { return leaves_; }
  TreeNode root() const noexcept { return {0, leaves_}; }

  static constexpr TreeNode left(TreeNode n) noexcept { return {n.begin, n.begin + (n.size() + 1) / 2}; }
  static constexpr TreeNode right(TreeNode n) noexcept { return {n.begin + (n.size() + 1) / 2, n.end}; }

  /// The leaves rank `rank` of `ranks` holds: contiguous, as even as possible (the first ones one
  /// more), the same split as data::LoaderOptions::unit_size gives each worker's part of a batch.
  TreeNode leaves_of(std::size_t rank, std::size_t ranks) const {
    if (ranks == 0 || rank >= ranks)
      throw ConfigError("SumTree: rank " + std::to_string(rank) + " is not one of " + std::to_string(ranks));
    const auto [b, e] = detail::split_range(leaves_, ranks, rank);
    return {b, e};
  }

  /// The largest nodes wholly inside `run`, left to right: together they hold its leaves, once each.
  /// A rank adds these up alone; no node above them lies inside its run.
  std::vector<TreeNode> cover(TreeNode run) const {
    if (run.begin > run.end || run.end > leaves_)
      throw ConfigError("SumTree: leaves [" + std::to_string(run.begin) + ", " + std::to_string(run.end) +
                        ") are not within the tree's " + std::to_string(leaves_));
    std::vector<TreeNode> nodes;
    if (run.size() > 0) cover(root(), run, nodes);
    return nodes;
  }

 private:
  static void cover(TreeNode node, TreeNode run, std::vector<TreeNode>& out) {
    if (node.end <= run.begin || run.end <= node.begin) return;
    if (run.begin <= node.begin && node.end <= run.end) {
      out.push_back(node);
      return;
    }
    cover(left(node), run, out);
    cover(right(node), run, out);
  }

  std::size_t leaves_;
};

}  // namespace flotilla::collective
#endif  // FLOTILLA_COLLECTIVE_SUMTREE_HPP_INCLUDED
