// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_COLLECTIVE_TREEALLREDUCE_HPP_INCLUDED
#define FLOTILLA_COLLECTIVE_TREEALLREDUCE_HPP_INCLUDED
// tree_allreduce: the sum of a global batch's shard gradients in the fixed order of a SumTree,
// across the ranks that computed them: the same bits for any number of ranks (see sum_tree.hpp).
//
// Rank r holds the leaves SumTree::leaves_of(r, N) and brings the values of the largest nodes
// inside them (SumTree::cover: one node where N divides the leaves into aligned runs, a few
// otherwise). The nodes above, which span ranks, are added in two phases, both bandwidth-optimal
// in the way a ring allreduce is:
//  1. the buffer is cut into N chunks; each rank sends every other rank that rank's chunk of each
//     of its nodes (N-1 rounds, rank r sending to r+s while receiving from r-s), so that rank r
//     holds every rank's nodes over chunk r, and adds them up in the tree's shape;
//  2. the finished chunks go once round the ring (N-1 steps), as in a ring allreduce's allgather.
// With K nodes a rank sends (N-1)/N of the buffer K times and then once more: where every rank has
// one node, 2(N-1)/N of it, a ring allreduce's bytes. The values travel raw (little-endian hosts).
#include <algorithm>
#include <bit>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "flotilla/collective/sum_tree.hpp"
#include "flotilla/collective/tags.hpp"
#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/thread_pool.hpp"
#include "flotilla/transport/operation.hpp"

namespace flotilla::detail {

/// A node's values over the part of the buffer being summed.
template <class T>
struct NodeValues {
  collective::TreeNode node;
  std::span<const T> values;
};

/// `dst` = the value of `node`: a given node's values, else its left child's plus its right
/// child's. scratch[depth] is the right child's buffer at each depth below.
template <class T>
void evaluate_tree(collective::TreeNode node, std::span<const NodeValues<T>> given, std::span<T> dst,
                   std::vector<std::vector<T>>& scratch, std::size_t depth) {
  for (const auto& g : given)
    if (g.node == node) {
      std::copy(g.values.begin(), g.values.end(), dst.begin());
      return;
    }
  if (node.size() <= 1 || depth >= scratch.size())
    throw ConfigError("tree_allreduce: leaf " + std::to_string(node.begin) + " of the sum is held by no rank");
  evaluate_tree(collective::SumTree::left(node), given, dst, scratch, depth);
  std::vector<T>& right = scratch[depth];
  right.resize(dst.size());
  evaluate_tree(collective::SumTree::right(node), given, std::span<T>(right), scratch, depth + 1);
  for (std::size_t i = 0; i < dst.size(); ++i) dst[i] = dst[i] + right[i];
}

/// Sends `out` to `to` while receiving `in` from `from`; either may be empty (a chunk of no values).
template <class E>
void swap_parts(E& e, std::size_t to, Tag tag, std::span<const std::byte> out, std::size_t from, std::span<std::byte> in) {
  if (!out.empty() && !in.empty())
    e.sendrecv(to, tag, out, from, in);
  else if (!out.empty())
    e.send(to, tag, out);
  else if (!in.empty())
    e.recv(from, tag, in);
}

}  // namespace flotilla::detail

namespace flotilla::collective {

/// Writes into `out` the sum over every rank of `tree`'s leaves, added in the tree's order. This
/// rank passes the values of tree.cover(tree.leaves_of(rank, size)), in that order, each as long
/// as `out` (which may be one of them). Every rank must call it with the same tree and length.
template <Transport E, class T>
void tree_allreduce(E& e, const SumTree& tree, std::span<const std::span<const T>> mine, std::span<T> out,
                    Tag tag = default_tags::tree_allreduce) {
  const std::size_t n = e.size(), w = e.rank(), values = out.size();
  const TreeNode run = tree.leaves_of(w, n);
  const std::vector<TreeNode> nodes = tree.cover(run);
  if (mine.size() != nodes.size())
    throw ConfigError("tree_allreduce: rank " + std::to_string(w) + " holds leaves [" + std::to_string(run.begin) + ", " +
                      std::to_string(run.end) + ") of " + std::to_string(tree.leaves()) + ", whose sum takes " +
                      std::to_string(nodes.size()) + " nodes; it was given " + std::to_string(mine.size()));
  for (std::size_t i = 0; i < mine.size(); ++i)
    if (mine[i].size() != values)
      throw ConfigError("tree_allreduce: node " + std::to_string(i) + " of rank " + std::to_string(w) + " has " +
                        std::to_string(mine[i].size()) + " values, the sum " + std::to_string(values));
  std::vector<std::vector<T>> scratch(static_cast<std::size_t>(std::bit_width(tree.leaves())) + 1);
  if (n == 1) {
    if (tree.leaves() > 0) detail::evaluate_tree<T>(tree.root(), std::vector<detail::NodeValues<T>>{{nodes[0], mine[0]}}, out, scratch, 0);
    return;
  }
  static_assert(std::endian::native == std::endian::little, "tree_allreduce sends values as they are in memory");
  const auto chunk = [&](std::size_t r) {
    const auto [b, end] = detail::split_range(values, n, r);
    return std::pair{b, end - b};
  };
  transport::OperationScope<E> op(e, tag, transport::OpKind::tree_allreduce, values);
  const auto [first, count] = chunk(w);
  std::vector<detail::NodeValues<T>> given;
  for (std::size_t i = 0; i < nodes.size(); ++i) given.push_back({nodes[i], mine[i].subspan(first, count)});
  // Phase 1: every rank's nodes over this rank's chunk.
  std::vector<std::vector<T>> received(n);
  std::vector<T> packed;
  for (std::size_t s = 1; s < n; ++s) {
    const std::size_t to = (w + s) % n, from = (w + n - s) % n;
    const auto [to_first, to_count] = chunk(to);
    packed.resize(nodes.size() * to_count);
    for (std::size_t i = 0; i < nodes.size(); ++i)
      std::copy_n(mine[i].begin() + static_cast<std::ptrdiff_t>(to_first), to_count, packed.begin() + static_cast<std::ptrdiff_t>(i * to_count));
    const std::vector<TreeNode> theirs = tree.cover(tree.leaves_of(from, n));
    received[from].resize(theirs.size() * count);
    detail::swap_parts(e, to, tag, std::as_bytes(std::span<const T>(packed)), from,
                       std::as_writable_bytes(std::span<T>(received[from])));
    for (std::size_t i = 0; i < theirs.size(); ++i)
      given.push_back({theirs[i], std::span<const T>(received[from]).subspan(i * count, count)});
  }
  if (tree.leaves() > 0) detail::evaluate_tree<T>(tree.root(), given, out.subspan(first, count), scratch, 0);
  // Phase 2: the finished chunks once round the ring.
  const std::size_t right = (w + 1) % n, left = (w + n - 1) % n;
  for (std::size_t s = 0; s + 1 < n; ++s) {
    const auto [send_first, send_count] = chunk((w + n - s) % n);
    const auto [recv_first, recv_count] = chunk((w + n - s - 1) % n);
    detail::swap_parts(e, right, tag, std::as_bytes(out.subspan(send_first, send_count)), left,
                       std::as_writable_bytes(out.subspan(recv_first, recv_count)));
  }
}

}  // namespace flotilla::collective
#endif  // FLOTILLA_COLLECTIVE_TREEALLREDUCE_HPP_INCLUDED
