// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_MESSAGETAGS_HPP_INCLUDED
#define FLOTILLA_CORE_MESSAGETAGS_HPP_INCLUDED
// Message tags: what matches a receive to its send, together with the peer. Tags from
// tags::reserved_begin up belong to flotilla's own protocols, and every one of them is listed
// here, once: the compiler checks that no two protocols share a tag, so a new protocol takes its
// tags from this list rather than picking numbers beside another file's.
//
// The reserved tags sit just above reserved_begin: the MPI transport carries reserved tags up to
// reserved_begin + MPI_TAG_UB directly, which may be as small as 32767 (transport/mpi.hpp).
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace flotilla {

using Tag = std::uint32_t;

namespace tags {
/// The first tag of flotilla's own protocols; user messages use tags below it.
inline constexpr Tag reserved_begin = 0x80000000u;
}  // namespace tags

namespace detail {

/// A protocol's tags: `count` consecutive tags from reserved_begin + `offset`.
struct ReservedTags {
  std::string_view name;
  Tag offset;
  Tag count = 1;
};

/// Every reserved tag, by the protocol that uses it.
inline constexpr std::array reserved_tags{
    // Trainer: epoch metrics, broadcasts of state, the workers' barrier, a policy's collectives,
    // the exchange states gathered for a checkpoint.
    ReservedTags{"metrics", 0x01},
    ReservedTags{"broadcast", 0x02},
    ReservedTags{"group_barrier", 0x03},
    ReservedTags{"policy_collective", 0x04},
    ReservedTags{"exchange_state", 0x05},
    // Normalisation layers' batch statistics over the global batch (SyncBatchNorm).
    ReservedTags{"normalization_statistics", 0x06},
    // Parameter servers.
    ReservedTags{"ps_push", 0x10},
    ReservedTags{"ps_reply", 0x11},
    ReservedTags{"ps_full_reply", 0x12},
    ReservedTags{"ps_reduce", 0x13},
    ReservedTags{"ps_reduce_reply", 0x14},
    // Collectives' defaults.
    ReservedTags{"ring_allreduce", 0x20},
    ReservedTags{"collective_broadcast", 0x21},
    ReservedTags{"allreduce_small", 0x22},
    ReservedTags{"tree_allreduce", 0x23},
    // Pipelines.
    ReservedTags{"pipeline_activations", 0x30},
    ReservedTags{"pipeline_gradients", 0x31},
    ReservedTags{"pipeline_replica_allreduce", 0x32},
    ReservedTags{"pipeline_replica_barrier", 0x33},
    ReservedTags{"pipeline_trainer_metrics", 0x34},
    ReservedTags{"pipeline_trainer_gather", 0x35},
    // Going on without a lost worker (the ring's agreement).
    ReservedTags{"loss_report", 0x40},
    ReservedTags{"loss_decision", 0x41},
    // The TCP transport's shared-memory setup.
    ReservedTags{"shared_memory_setup", 0x50},
    // Embedding rows on parameter servers (sparse/): requests and replies, their payloads.
    ReservedTags{"sparse_rows", 0x60, 0x8},
    // The sparse trainer's own messages among workers (metrics, the dense tower's allreduce).
    ReservedTags{"sparse_trainer", 0x68, 0x8},
    // Gradient buckets, one tag each (a bucket's exchange may be in flight beside another's).
    ReservedTags{"bucket", 0x100, 0x4000},
};

/// Whether no two entries share a name or a tag.
consteval bool reserved_tags_are_distinct() {
  for (std::size_t i = 0; i < reserved_tags.size(); ++i)
    for (std::size_t j = i + 1; j < reserved_tags.size(); ++j) {
      const auto& a = reserved_tags[i];
      const auto& b = reserved_tags[j];
      if (a.name == b.name) return false;
      if (a.offset < b.offset + b.count && b.offset < a.offset + a.count) return false;
    }
  return true;
}
static_assert(reserved_tags_are_distinct(), "two entries of detail::reserved_tags share a name or a tag");

/// The first tag of the protocol named `name` (a compile error when it is not listed).
consteval Tag reserved_tag(std::string_view name) {
  for (const auto& t : reserved_tags)
    if (t.name == name) return tags::reserved_begin + t.offset;
  throw "detail::reserved_tag: no such entry in detail::reserved_tags";
}
/// How many tags the protocol named `name` has.
consteval Tag reserved_tag_count(std::string_view name) {
  for (const auto& t : reserved_tags)
    if (t.name == name) return t.count;
  throw "detail::reserved_tag_count: no such entry in detail::reserved_tags";
}

}  // namespace detail
}  // namespace flotilla
#endif  // FLOTILLA_CORE_MESSAGETAGS_HPP_INCLUDED
