// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_POLICY_COMPRESSED_HPP_INCLUDED
#define FLOTILLA_POLICY_COMPRESSED_HPP_INCLUDED
// policy::Compressed<Codec, Inner, ErrorFeedback>: the inner policy with `Codec` on the wire, for
// the gradients pushed or allreduced and for the parameters pulled from servers. With a 16-bit
// codec the bytes on the wire halve; with error feedback the rounding error of each step's
// gradient is added to the next step's before encoding, so it is delayed rather than lost.
#include <string_view>

#include "flotilla/concepts/codec.hpp"
#include "flotilla/concepts/update_policy.hpp"
#include "flotilla/policy/synchronous.hpp"

namespace flotilla::policy {

template <class Codec, class Inner = Synchronous<>, bool ErrorFeedback = false>
struct Compressed : Inner {
  static_assert(flotilla::Codec<Codec, float>,
                "policy::Compressed<Codec, Inner>: Codec is not a codec (see docs/concepts/codec.md); built-in: "
                "codec::Fp16, codec::Bf16, codec::Bf16Truncate, codec::Fp32");
  using codec = Codec;
  static constexpr bool error_feedback = ErrorFeedback;
};

}  // namespace flotilla::policy
#endif  // FLOTILLA_POLICY_COMPRESSED_HPP_INCLUDED
