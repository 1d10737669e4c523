#pragma once
// The Optimizer extension point. See docs/concepts/optimizer.md for a user-written optimizer.
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "flotilla/core/layer_args.hpp"

namespace flotilla {

/// What an optimizer is told at each update.
struct StepInfo {
  std::uint64_t step = 1;      ///< 1 for the first update (Adam's bias correction counts from 1)
  double learning_rate = 0;    ///< the scheduled rate for this update
};

/// An optimizer O for scalar type T: a small configuration object (learning rate and friends) with
///  - a nested `state<T>`, constructible from the number of parameters it serves, holding the
///    per-parameter buffers (momentum, moments) and exposing them as `buffers()` for checkpoints;
///  - `update(params, grads, state, tensors, info)`, which applies one step to `params` in place.
///    `tensors` partitions the spans into parameter tensors (offsets relative to the spans), so an
///    optimizer can treat weights and biases differently. On a parameter-server shard the spans and
///    tensors cover only the shard.
template <class O, class T>
concept Optimizer =
    requires { { O::name } -> std::convertible_to<std::string_view>; } &&
    std::constructible_from<typename O::template state<T>, std::size_t> &&
    requires(const O& o, typename O::template state<T>& s, std::span<T> p, std::span<const T> g,
             std::span<const TensorInfo> tensors, const StepInfo& info) {
      { o.learning_rate } -> std::convertible_to<double>;
      o.update(p, g, s, tensors, info);
      { s.buffers() };
    };

/// Optional: an optimizer that declares `static constexpr bool elementwise = true;` promises that
/// update() computes each element from that element's parameter, gradient and state alone (and
/// the tensor's role), so that any split of the tensors into pieces gives the same result (to the
/// last bit, where a cut moves an element between vectorised and scalar code). The
/// trainer then updates large buffers on all its cores at once, each core a slice. Leave it out
/// for an optimizer that looks at a whole tensor (a norm, as LAMB or LARS take) or keeps state
/// outside its per-element buffers.
template <class O>
inline constexpr bool elementwise_optimizer = requires { requires O::elementwise; };

}  // namespace flotilla
