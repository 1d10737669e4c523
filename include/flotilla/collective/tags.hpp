// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_COLLECTIVE_TAGS_HPP_INCLUDED
#define FLOTILLA_COLLECTIVE_TAGS_HPP_INCLUDED
// The default message tags of flotilla's collectives.
//
// Every collective call uses one tag, given in its options (or as its last argument); messages
// between two ranks with one tag arrive in the order sent, and every rank of a ring or chain sends
// and receives the same sequence of messages, so one tag per call suffices and consecutive calls
// may share it. Calls that can be in flight at the same time on the same endpoints (one allreduce
// per gradient bucket) need distinct tags, so that their messages never mix.
//
// The defaults are entries of the registry of reserved tags (core/message_tags.hpp), which keeps
// them clear of the other protocols' tags.
#include "flotilla/core/message_tags.hpp"

namespace flotilla::collective::default_tags {

inline constexpr Tag ring_allreduce = detail::reserved_tag("ring_allreduce");
inline constexpr Tag broadcast = detail::reserved_tag("collective_broadcast");
inline constexpr Tag allreduce_small = detail::reserved_tag("allreduce_small");
inline constexpr Tag tree_allreduce = detail::reserved_tag("tree_allreduce");

}  // namespace flotilla::collective::default_tags
#endif  // FLOTILLA_COLLECTIVE_TAGS_HPP_INCLUDED
