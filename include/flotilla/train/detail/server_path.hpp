// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_DETAIL_SERVERPATH_HPP_INCLUDED
#define FLOTILLA_TRAIN_DETAIL_SERVERPATH_HPP_INCLUDED
// A worker's gradient path to parameter servers: each shard's gradient goes to the policy's
// exchange (a push to its server, by default) as soon as backward has finished it; once every
// shard is pushed, the worker pulls the updated parameters of each, which a server answers after
// aggregating (synchronous), at once (asynchronous), or when the worker is within the staleness
// bound of the slowest.
//
//   backward -> shard ready (ReadyRunner) -> exchange.exchange(shard) -> servers update -> pull
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "flotilla/concepts/gradient_exchange.hpp"
#include "flotilla/concepts/update_policy.hpp"
#include "flotilla/topology/detail/parameter_server.hpp"
#include "flotilla/train/detail/live_workers.hpp"
#include "flotilla/train/detail/ready_runner.hpp"
#include "flotilla/train/timeline.hpp"
#include "flotilla/train/trainer_options.hpp"
#include "flotilla/train/worker_loss.hpp"

namespace flotilla::detail {

/// Whether the engine forms the parameter-server traffic's codes itself (a GPU: the push's
/// gradients and the pull's parameters cross to and from the host encoded, never as fp32).
template <class Engine, class Codec>
inline constexpr bool engine_encodes_for_servers = [] {
  if constexpr (requires { Engine::template encodes_on_device<Codec>; })
    return Engine::template encodes_on_device<Codec>;
  else
    return false;
}();

/// The servers as a shard exchange's peers: push(shard) sends that shard of this worker's
/// gradient buffer (or of the codes the engine formed on its device).
template <class T, class E, class Client, class Engine, bool OnDevice>
struct ServerPeers {
  static constexpr bool encodes_on_device = OnDevice;
  E& endpoint;
  Client& client;
  Engine& engine;
  void push(std::size_t shard) {
    if constexpr (OnDevice) {
      client.push_encoded(endpoint, shard, engine.pushed_gradient_codes());
    } else {
      client.push(endpoint, shard, std::span<const T>(engine.gradients()));
    }
  }
};

template <class M, class Policy, class Codec, class E, class State>
class ServerPath {
 public:
  using T = typename M::scalar_type;
  using client_type = ParameterServerClient<T, Codec>;
  using engine_type = typename State::engine_type;
  static constexpr bool on_device = engine_encodes_for_servers<engine_type, Codec>;

  /// Says hello to every server (sending worker 0's parameters, which the servers start from)
  /// unless this worker is rejoining a running job.
  ServerPath(const TrainerOptions<M>& options, E& e, State& s, Timeline& timeline, std::size_t workers, std::ostream* log,
             bool rejoining)
      : e_(e),
        s_(s),
        timeline_(timeline),
        worker_(e.rank()),
        client_(balanced_shards(M::parameter_count, options.servers), workers),
        live_(workers, e.rank(), options.batch_size, Policy::aggregate, log) {
    if constexpr (on_device) s.engine.template encode_gradients_for_push<Codec>(policy_error_feedback<Policy>);
    // Another worker's death must not break this one's endpoint (its servers decide who is left).
    if constexpr (ContinuesWithoutLostPeers<E>)
      if (continues_without_lost_workers(options.on_worker_loss, Policy::aggregate)) e.continue_without_lost_peers(true);
    if (rejoining) return;
    client_.exchange_full(e, PsHeader::hello, s.engine.parameters());
    // The hello's answer is the servers' parameters in full precision. A worker that goes on from
    // an earlier step (a resumed set, a second fit() call) held them as its last pull gave them,
    // through a lossy codec: it takes them so again, and continues the same numbers as a run that
    // never stopped.
    if (s.step > 0 && !Codec::lossless) as_pulled(s.engine.parameters());
  }

  client_type& client() noexcept { return client_; }
  LiveWorkers& live() noexcept { return live_; }

  /// Arms the pushes: during backward on a thread of their own (`background`), else after it.
  void start(bool background) {
    std::vector<Range> order(client_.shards().rbegin(), client_.shards().rend());
    runner_ = std::make_unique<ReadyRunner>(order, [this, servers = order.size()](std::size_t i, Range r) {
      push(servers - 1 - i, r);
    }, background);
  }
  ReadyRunner* runner() const noexcept { return runner_.get(); }

  /// After every shard is pushed: pulls each shard's updated parameters, and counts the update.
  /// Returns the seconds it took; `counters` take the furthest ahead and stalest of the replies.
  double update(StepCounters& counters) {
    const auto t0 = Timeline::clock::now();
    for (std::size_t k = 0; k < client_.shards().size(); ++k) {
      const auto info = pull(k);
      counters.steps_ahead = std::max(counters.steps_ahead, info.steps_ahead);
      counters.staleness = std::max(counters.staleness, info.staleness);
    }
    ++s_.step;
    const auto t1 = Timeline::clock::now();
    timeline_.record("pull parameters", "communication", worker_, 0, t0, t1);
    return std::chrono::duration<double>(t1 - t0).count();
  }

  /// Tells the servers this worker is done, with its final parameters.
  void finish() { client_.exchange_full(e_, PsHeader::done, s_.engine.parameters()); }

 private:
  void push(std::size_t shard, Range r) {
    const auto t0 = Timeline::clock::now();
    ServerPeers<T, E, client_type, engine_type, on_device> servers{e_, client_, s_.engine};
    // Where the engine encodes the push on its device, the fp32 values stay there: asking for the
    // host view would copy every gradient across the bus beside its codes.
    std::span<T> values;
    if constexpr (!on_device) values = s_.engine.gradients().subspan(r.begin, r.size());
    GradientBucket<T, decltype(servers)> bucket{shard, r.begin, values, servers, 0};
    s_.exchange.exchange(bucket);
    timeline_.record("push shard " + std::to_string(shard), "communication", worker_, 1, t0, Timeline::clock::now());
  }

  void as_pulled(std::span<T> parameters) {
    std::vector<std::byte> codes;
    for (const Range& r : client_.shards()) {
      const auto shard = parameters.subspan(r.begin, r.size());
      codes.resize(Codec::encoded_size(shard.size()));
      Codec::encode(std::span<const T>(shard), std::span<std::byte>(codes));
      Codec::decode(std::span<const std::byte>(codes), shard);
    }
  }

  auto pull(std::size_t k) {
    if constexpr (on_device) {
      return client_.pull_encoded(e_, k, [this](std::size_t begin, std::span<const std::byte> codes) {
        s_.engine.template decode_pulled_parameters<Codec>(begin, codes);
      });
    } else {
      return client_.pull(e_, k, s_.engine.parameters());
    }
  }

  E& e_;
  State& s_;
  Timeline& timeline_;
  std::size_t worker_;
  client_type client_;
  LiveWorkers live_;
  std::unique_ptr<ReadyRunner> runner_;
};

}  // namespace flotilla::detail
#endif  // FLOTILLA_TRAIN_DETAIL_SERVERPATH_HPP_INCLUDED
