#pragma once
// The default message tags of flotilla's collectives.
//
// Every collective call uses one tag, given in its options (or as its last argument); messages
// between two ranks with one tag arrive in the order sent, and every rank of a ring or chain sends
// and receives the same sequence of messages, so one tag per call suffices and consecutive calls
// may share it. Calls that can be in flight at the same time on the same endpoints (one allreduce
// per gradient bucket) need distinct tags, so that their messages never mix.
//
// The defaults lie just above tags::reserved_begin, clear of the other protocols' tags
// (detail::protocol_tags in topology/ring.hpp): the MPI transport carries reserved tags up to
// reserved_begin + MPI_TAG_UB only, which may be as small as 32767.
#include "flotilla/concepts/transport.hpp"

namespace flotilla::collective::default_tags {

inline constexpr Tag ring_allreduce = tags::reserved_begin + 0x20;
inline constexpr Tag broadcast = tags::reserved_begin + 0x21;
inline constexpr Tag allreduce_small = tags::reserved_begin + 0x22;

}  // namespace flotilla::collective::default_tags
