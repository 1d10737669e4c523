// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// libFuzzer harness: the safetensors reader on arbitrary bytes, then, for a file that parses, the
// load of a small network's parameters from it. Either the bytes parse and every tensor's bytes
// match its dtype and shape (and encode back to a file that parses the same), or a flotilla::Error
// says why; a crash, a sanitizer report, a leak or another exception type is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "flotilla/interop/torch.hpp"

namespace {
using Net = flotilla::Sequential<flotilla::Input<2, 3, 3>, flotilla::Conv2D<2, 2>, flotilla::BatchNorm2D<>, flotilla::Flatten,
                                 flotilla::Dense<3>>;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto f = flotilla::safetensors::decode(std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size), "fuzz input");
    for (const auto& t : f.tensors)
      if (t.bytes.size() != t.elements() * flotilla::safetensors::size_of(t.dtype)) std::abort();
    const auto again = flotilla::safetensors::decode(flotilla::safetensors::encode(f), "re-encoded");
    if (again.tensors.size() != f.tensors.size() || again.metadata != f.metadata) std::abort();
    std::vector<float> params(flotilla::Network<Net, float>::parameter_count, 1.0f);
    flotilla::interop::load_safetensors<Net>(f, std::span<float>(params));
  } catch (const flotilla::Error&) {
    // Rejected with a message.
  }
  return 0;
}
