// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_DETAIL_WORKERSTATE_HPP_INCLUDED
#define FLOTILLA_TRAIN_DETAIL_WORKERSTATE_HPP_INCLUDED
// Everything one worker rank of the data-parallel Trainer owns and keeps from one fit() call to
// the next: its engine (parameters, gradients, the replicas of its cores), its optimizer state,
// the updates it has taken part in, and its gradient exchange (with any state that carries from
// step to step, such as error-feedback residuals).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "flotilla/concepts/gradient_exchange.hpp"
#include "flotilla/model.hpp"
#include "flotilla/train/detail/engine.hpp"
#include "flotilla/train/trainer_options.hpp"

namespace flotilla::detail {

template <class M, class Exchange>
struct WorkerState {
  using T = typename M::scalar_type;
  using engine_type = typename engine_for<M>::type;
  using optimizer_state = typename M::optimizer::template state<T>;
  using exchange_type = Exchange;

  explicit WorkerState(const TrainerOptions<M>& o) : engine(o.threads, o.eval_batch_size, o.seed), opt(M::parameter_count) {
    if constexpr (requires { engine.set_stream_gradients(true); }) engine.set_stream_gradients(o.stream_gradients);
  }
  /// Another worker's copy of `from`: parameters, optimizer state, step and seed (the exchange's
  /// state is each worker's own, and starts empty).
  WorkerState(const TrainerOptions<M>& o, const WorkerState& from) : WorkerState(o) {
    std::copy(from.engine.parameters().begin(), from.engine.parameters().end(), engine.parameters().begin());
    const auto src = from.optimizer_buffers();
    auto dst = opt.buffers();
    for (std::size_t i = 0; i < dst.size(); ++i) std::copy(src[i].begin(), src[i].end(), dst[i].begin());
    step = from.step;
    engine.set_seed(from.engine.seed());
  }

  /// The optimizer's buffers, current on the host (a GPU engine keeps them on the device).
  std::vector<std::span<const T>> optimizer_buffers() const {
    engine.optimizer_state_to_host(const_cast<optimizer_state&>(opt));
    auto buffers = const_cast<optimizer_state&>(opt).buffers();
    return {buffers.begin(), buffers.end()};
  }

  /// Whether the exchange carries state from step to step that checkpoints must keep.
  static constexpr bool stateful_exchange = StatefulExchange<Exchange, T>;

  /// A copy of the exchange's state (empty when it keeps none).
  std::vector<std::vector<T>> exchange_state() const {
    std::vector<std::vector<T>> out;
    if constexpr (stateful_exchange)
      for (const auto& b : exchange.state()) out.emplace_back(b.begin(), b.end());
    return out;
  }
  /// Starts the exchange afresh, with `saved` as its state where given.
  void restore_exchange(const std::vector<std::vector<T>>& saved) {
    exchange = Exchange{};
    if constexpr (stateful_exchange)
      if (!saved.empty()) exchange.restore(saved);
  }

  engine_type engine;
  optimizer_state opt;
  std::uint64_t step = 0;
  /// Updates skipped for a gradient that was not finite (NonFiniteLoss::skip_update).
  std::uint64_t skipped_updates = 0;
  Exchange exchange;
};

}  // namespace flotilla::detail
#endif  // FLOTILLA_TRAIN_DETAIL_WORKERSTATE_HPP_INCLUDED
