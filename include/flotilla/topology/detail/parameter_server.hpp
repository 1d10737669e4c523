// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TOPOLOGY_DETAIL_PARAMETERSERVER_HPP_INCLUDED
#define FLOTILLA_TOPOLOGY_DETAIL_PARAMETERSERVER_HPP_INCLUDED
// The parameter-server topology's runtime: how the flat parameter buffer is cut into shards, what
// a server does with the pushes it receives, and the worker's side of the protocol.
//
// Ranks [0, W) are workers and ranks [W, W + S) servers; server s holds shard s. Messages:
//   worker -> server, tag ps_push:       Header{kind, version_used} + Codec(gradient shard)
//   server -> worker, tag ps_reply:      Header{reply, version, steps_ahead, staleness} + Codec(params shard)
//   server -> worker, tag ps_full_reply: Header + the params shard in full precision (after hello,
//                                        done, and checkpoint: a request to save the shard)
// Every message of a tag has one size, known to both sides in advance; the 32-byte header is part of
// the payload as the transport sees it (its own framing is counted apart).
//
// A server either aggregates (synchronous: one push from every worker, summed in worker order so
// the result does not depend on arrival order, then one update) or applies each push as it comes
// (asynchronous), replying to a worker only while it is at most `staleness_bound` pushes ahead of
// the slowest worker still training (stale synchronous parallel).
//
// A worker that dies or stalls (the transport throws PeerLostError naming it): an asynchronous
// server drops it from the set and goes on serving the others (the staleness bound then counts
// only live workers, or they would wait forever for the dead one's clock). A synchronous server
// stops by default with the transport's error, which names the rank, its host and the operation:
// a step was meant to average every worker's gradient. When told to go on
// (continue_without_lost_workers(true)) it aggregates the workers left and rescales the sum to
// their mean: the step's effective batch shrinks. A dead server ends the job on its workers.
// Server 0 also answers the workers' reductions (ps_reduce.hpp), which tell them who is left.
//
// A lost worker that restarts can rejoin asynchronous serving (over a transport that accepts
// rejoining peers: TCP): it says hello with the `rejoining` flag, first to server 0. Server 0
// re-admits it only at a clean boundary of its reduction rounds: no round open, and every worker
// still training in the middle of an epoch (its pushes so far not a multiple of the steps per
// epoch the rejoiner announced). Then every one of them has run the same rounds and the next
// round is the end of the current epoch, which the rejoiner reaches too: the reply tells it the
// position (the furthest worker's pushes: epoch and batch) and the round number. The other
// servers re-admit it at once. On every server its clock starts at that position, like the clock of a
// worker that never left: under a staleness bound it waits for the slowest like any other worker
// that far ahead.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "flotilla/concepts/codec.hpp"
#include "flotilla/concepts/optimizer.hpp"
#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/log.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/core/layer_args.hpp"
#include "flotilla/optim/schedule.hpp"
#include "flotilla/optim/state_tensors.hpp"
#include "flotilla/topology/detail/ps_header.hpp"
#include "flotilla/topology/detail/ps_reduce.hpp"
#include "flotilla/topology/detail/ring.hpp"

namespace flotilla::detail {

/// Contiguous shards of nearly equal size (by elements, hence by bytes), one per server.
inline std::vector<Range> balanced_shards(std::size_t parameters, std::size_t servers) {
  std::vector<Range> shards(servers);
  for (std::size_t s = 0; s < servers; ++s) {
    const std::size_t base = parameters / servers, extra = parameters % servers;
    const std::size_t begin = s * base + std::min(s, extra);
    shards[s] = {begin, begin + base + (s < extra ? 1 : 0)};
  }
  return shards;
}

/// The parts of `tensors` inside `r`, with offsets relative to r.begin: what an optimizer serving
/// only that shard needs to know.
inline std::vector<TensorInfo> tensors_within(std::span<const TensorInfo> tensors, Range r) {
  std::vector<TensorInfo> out;
  for (const auto& t : tensors) {
    const std::size_t b = std::max(t.offset, r.begin), e = std::min(t.offset + t.size, r.end);
    if (b >= e) continue;
    TensorInfo part = t;
    part.offset = b - r.begin;
    part.size = e - b;
    out.push_back(part);
  }
  return out;
}

/// One server's shard of the parameters with its optimizer state, and the loop that serves it.
/// The state outlives a fit() call, so a second call continues where the first stopped.
template <class T, class Optimizer, class Codec>
class ParameterServerShard {
 public:
  using optimizer_state = typename Optimizer::template state<T>;

  ParameterServerShard(Range shard, std::span<const T> initial, std::vector<TensorInfo> tensors)
      : shard_(shard), params_(initial.begin(), initial.end()), state_(shard.size()), tensors_(std::move(tensors)) {}

  Range shard() const noexcept { return shard_; }
  std::span<T> parameters() noexcept { return params_; }
  optimizer_state& optimizer_buffers() noexcept { return state_; }
  /// Updates applied so far (the learning-rate schedule's step on this shard).
  std::uint64_t updates() const noexcept { return updates_; }
  /// Pushes received and applied (or summed into a step) so far.
  std::uint64_t pushes() const noexcept { return pushes_; }
  /// Why each worker dropped by serve() was dropped (asynchronous serving only), in order.
  const std::vector<std::string>& dropped_workers() const noexcept { return dropped_; }
  /// Workers re-admitted after they were lost (rejoins), and pushes applied from them since.
  std::uint64_t rejoins() const noexcept { return rejoins_; }
  std::uint64_t pushes_after_rejoins() const noexcept { return pushes_after_rejoins_; }
  /// Sets the update count, for a shard restored from a checkpoint.
  void set_updates(std::uint64_t updates) noexcept { updates_ = updates; }
  /// Whether serve() goes on without a worker that dies or stalls (over transports that can go on
  /// without a peer). Unset: asynchronous serving goes on, synchronous serving stops.
  void continue_without_lost_workers(bool on) noexcept { continue_without_lost_workers_ = on; }

  static std::size_t push_size(std::size_t n) { return PsHeader::size + Codec::encoded_size(n); }
  static std::size_t full_size(std::size_t n) { return PsHeader::size + n * sizeof(T); }

  /// Serves `workers` workers (job ranks 0..workers-1) until each has said it is done.
  /// `aggregate` and `staleness_bound` come from the policy. A worker's checkpoint message (the
  /// step in its header) calls `save(step)`, which returns whether the shard was saved; the reply
  /// says so. In order with that worker's pushes, so in synchronous training the shard saved is
  /// exactly the one of that step.
  template <Transport E>
  void serve(E& e, std::size_t workers, bool aggregate, std::size_t staleness_bound, const Optimizer& optimizer,
             const std::function<double(std::uint64_t)>& schedule,
             const std::function<bool(std::uint64_t step)>& save = {}) {
    const std::size_t n = shard_.size();
    std::vector<std::byte> in(push_size(n)), reply(push_size(n)), full(full_size(n));
    Buffer<T> sum(n, T(0));
    std::vector<Buffer<T>> slots(aggregate ? workers : 0, Buffer<T>(n));
    std::vector<char> pushed(workers, 0), done(workers, 0), pending(workers, 0);
    std::vector<std::uint64_t> clock(workers, 0), staleness(workers, 0);
    // lost: dropped (not finished); joining: a rejoiner's steps per epoch while server 0 waits
    // for a clean boundary to re-admit it; rejoined: re-admitted (its pushes are counted).
    std::vector<char> lost(workers, 0), rejoined(workers, 0);
    std::vector<std::uint64_t> joining(workers, 0);
    std::size_t done_count = 0;
    // Serving survives a lost worker when the transport can go on without a peer, and when asked
    // to (asynchronous serving unless told otherwise).
    bool tolerate = false;
    if constexpr (ContinuesWithoutLostPeers<E>) {
      tolerate = continue_without_lost_workers_.value_or(!aggregate);
      if (tolerate) e.continue_without_lost_peers(true);
    }
    if constexpr (requires {
                    e.accept_rejoins(true);
                    e.rejoin_address();
                  }) {
      if (tolerate && !aggregate) {
        e.accept_rejoins(true);
        if (const std::string at = e.rejoin_address(); !at.empty()) {
          log_message(LogLevel::info, "parameter server " + std::to_string(e.rank()),
                      "a lost worker can rejoin at " + at);
        }
      }
    }
    // Server 0 answers the workers' reductions (epoch metrics, evaluation, barriers).
    const bool reduces = e.rank() == workers;
    PsReduceRounds rounds(reduces ? workers : 0);
    auto drop = [&](const PeerLostError& err) {
      const std::size_t w = err.peer();
      if (!tolerate || w >= workers) throw err;
      joining[w] = 0;
      if (done[w]) return;
      done[w] = 1;
      lost[w] = 1;
      pending[w] = 0;
      ++done_count;
      dropped_.push_back(err.what());
      std::size_t live = 0;
      for (std::size_t v = 0; v < workers; ++v) live += done[v] ? 0 : 1;
      log_message(LogLevel::warning, "parameter server " + std::to_string(e.rank()),
                  "dropped worker " + std::to_string(w) + ", going on (" + std::to_string(live) +
                      " still training): " + err.what());
    };

    auto apply = [&](std::span<const T> gradient) {
      optim::update_trainable(optimizer, std::span<T>(params_), gradient, state_, std::span<const TensorInfo>(tensors_),
                              scheduled_step(optimizer, schedule, updates_), trainable_);
      ++updates_;
    };
    auto send_reply = [&](std::size_t w, std::uint64_t ahead) {
      PsHeader h{PsHeader::reply, 0, updates_, ahead, staleness[w]};
      h.write(reply.data());
      Codec::encode(std::span<const T>(params_), std::span<std::byte>(reply).subspan(PsHeader::size));
      e.send(w, protocol_tags::ps_reply, reply);
    };
    auto send_full = [&](std::size_t w, std::uint32_t flags = 0, std::uint64_t ahead = 0, std::uint64_t round = 0) {
      PsHeader h{PsHeader::reply, flags, updates_, ahead, round};
      h.write(full.data());
      if (n) std::memcpy(full.data() + PsHeader::size, params_.data(), n * sizeof(T));
      e.send(w, protocol_tags::ps_full_reply, full);
    };
    auto slowest = [&] {
      std::uint64_t m = std::numeric_limits<std::uint64_t>::max();
      for (std::size_t w = 0; w < workers; ++w)
        if (!done[w]) m = std::min(m, clock[w]);
      return m;
    };
    // Releases the waiting workers that are within the bound of the slowest one still training.
    // A worker lost while being answered is dropped; the slowest may then have changed.
    auto release = [&] {
      for (bool again = true; again;) {
        again = false;
        const std::uint64_t low = slowest();
        for (std::size_t w = 0; w < workers; ++w) {
          if (!pending[w]) continue;
          const std::uint64_t ahead =
              low == std::numeric_limits<std::uint64_t>::max() ? 0 : clock[w] - std::min(clock[w], low);
          if (ahead <= staleness_bound) {
            pending[w] = 0;
            try {
              send_reply(w, ahead);
            } catch (const PeerLostError& err) {
              drop(err);
              again = true;
            }
          }
        }
      }
    };
    auto aggregate_if_complete = [&] {
      std::size_t expected = 0, have = 0, contributions = 0;
      for (std::size_t w = 0; w < workers; ++w) {
        contributions += pushed[w] ? 1 : 0;  // a worker lost after pushing still counts: its gradient is whole
        if (done[w]) continue;
        ++expected;
        have += pushed[w] ? 1 : 0;
      }
      if (expected == 0 || have < expected) return;
      std::fill(sum.begin(), sum.end(), T(0));
      auto total = VectorView<T>(sum.data(), static_cast<Eigen::Index>(n));
      for (std::size_t w = 0; w < workers; ++w)
        if (pushed[w]) total += ConstVectorView<T>(slots[w].data(), static_cast<Eigen::Index>(n));
      // Each worker scaled its gradient by 1 / (the batch of all `workers`): with fewer, the sum
      // is rescaled to the mean over the samples that were computed (the effective batch shrinks).
      if (contributions > 0 && contributions < workers)
        total *= static_cast<T>(static_cast<double>(workers) / static_cast<double>(contributions));
      apply(std::span<const T>(sum));
      for (std::size_t w = 0; w < workers; ++w) {
        if (!pushed[w]) continue;
        pushed[w] = 0;
        if (done[w]) continue;  // lost after its push
        try {
          send_reply(w, 0);
        } catch (const PeerLostError& err) {
          drop(err);
        }
      }
    };

    // Re-admits worker w, lost earlier, and sends it the shard (and, from server 0, where it
    // goes on: `position` in steps, `round` the next reduction round).
    auto admit = [&](std::size_t w, std::uint64_t position, std::uint64_t round) {
      if (done[w]) --done_count;
      done[w] = lost[w] = pending[w] = 0;
      joining[w] = 0;
      rejoined[w] = 1;
      staleness[w] = 0;
      // Its pushes count on from where it goes on, as the others' do: a clock behind its position
      // would make it the slowest in name, holding the others back under a staleness bound while it
      // waits for them at the end of the epoch (a deadlock).
      clock[w] = position;
      ++rejoins_;
      std::size_t live = 0;
      for (std::size_t v = 0; v < workers; ++v) live += done[v] ? 0 : 1;
      log_message(LogLevel::info, "parameter server " + std::to_string(e.rank()),
                  "worker " + std::to_string(w) + " rejoined at update " + std::to_string(updates_) + " (step " +
                      std::to_string(position) + "), " + std::to_string(live) + " training");
      try {
        send_full(w, 0, position, round);
      } catch (const PeerLostError& err) {
        drop(err);
      }
    };
    // Server 0: re-admits the waiting rejoiners once the boundary is clean (see the file comment),
    // or tells them it is too late when no worker is training any more.
    auto admit_waiting = [&] {
      for (std::size_t w = 0; w < workers; ++w) {
        if (!joining[w]) continue;
        std::uint64_t furthest = 0;
        bool clean = !rounds.open(), anyone = false;
        for (std::size_t v = 0; v < workers; ++v) {
          if (done[v] || v == w) continue;
          anyone = true;
          furthest = std::max(furthest, clock[v]);
          if (clock[v] % joining[w] == 0) clean = false;
        }
        if (!anyone) {
          joining[w] = 0;
          try {
            send_full(w, PsHeader::too_late);
          } catch (const PeerLostError& err) {
            drop(err);
          }
        } else if (clean) {
          admit(w, furthest, rounds.round());
        }
      }
    };

    // The lost worker may have been the one a step, a release or a reduction waited for.
    auto after_loss = [&] {
      if (aggregate) {
        aggregate_if_complete();
      } else {
        release();
      }
      if (reduces) rounds.answer_if_complete(e, done, drop);
    };
    while (done_count < workers) {
      // A worker lost while the endpoint was reading another's message is marked lost without an
      // error (that receive did not need it): look, or the server would wait for it for ever.
      if constexpr (ReportsLostPeers<E>) {
        bool found = false;
        for (std::size_t v = 0; v < workers; ++v) {
          if (done[v] || !e.peer_lost(v)) continue;
          drop(PeerLostError("parameter server " + std::to_string(e.rank()) + ": worker " + std::to_string(v) +
                                 "'s connection was lost while another worker's message was being read "
                                 "(it died or stalled)",
                             v));
          found = true;
        }
        if (found) {
          after_loss();
          continue;
        }
      }
      std::size_t w = 0;
      try {
        w = e.recv_any(protocol_tags::ps_push, in);
      } catch (const PeerLostError& err) {
        drop(err);
        after_loss();
        continue;
      }
      if (w >= workers)
        throw TransportError("parameter server " + std::to_string(e.rank()) + ": push from rank " + std::to_string(w) +
                             ", which is not a worker");
      const PsHeader h = PsHeader::read(in.data());
      const auto payload = std::span<const std::byte>(in).subspan(PsHeader::size);
      switch (h.kind) {
        case PsHeader::hello:
          if (h.flags & PsHeader::rejoining) {
            if (aggregate || !tolerate)
              throw TransportError("parameter server " + std::to_string(e.rank()) + ": worker " + std::to_string(w) +
                                   " rejoins, which only asynchronous serving that goes on without lost workers allows");
            if (done[w] && !lost[w]) {
              send_full(w, PsHeader::too_late);  // it had finished: nothing to rejoin
            } else if (reduces) {
              if (h.version == 0)
                throw TransportError("parameter server " + std::to_string(e.rank()) + ": worker " + std::to_string(w) +
                                     " rejoins with 0 steps per epoch");
              joining[w] = h.version;  // admitted at a clean boundary (admit_waiting)
            } else {
              admit(w, h.steps_ahead, 0);
            }
            break;
          }
          try {
            send_full(w);
          } catch (const PeerLostError& err) {
            drop(err);
          }
          break;
        case PsHeader::reduce:
          if (!reduces)
            throw TransportError("parameter server " + std::to_string(e.rank()) + ": worker " + std::to_string(w) +
                                 " sent a reduction, which only server 0 (rank " + std::to_string(workers) + ") answers");
          rounds.receive(e, w, h);
          break;
        case PsHeader::checkpoint:
          try {
            send_full(w, save && save(h.version) ? PsHeader::saved : 0);
          } catch (const PeerLostError& err) {
            drop(err);
          }
          break;
        case PsHeader::done:
          if (!done[w]) {
            done[w] = 1;
            ++done_count;
          }
          try {
            send_full(w);
          } catch (const PeerLostError& err) {
            if (!tolerate) throw;
            (void)err;  // it had finished: nothing is lost
          }
          if (aggregate) {
            aggregate_if_complete();
          } else {
            release();
          }
          break;
        case PsHeader::push:
          if (done[w])
            throw TransportError("parameter server " + std::to_string(e.rank()) + ": push from worker " + std::to_string(w) +
                                 " after it said it was done");
          if (aggregate) {
            if (pushed[w])
              throw TransportError("parameter server " + std::to_string(e.rank()) + ": worker " + std::to_string(w) +
                                   " pushed twice in one synchronous step");
            Codec::decode(payload, std::span<T>(slots[w]));
            pushed[w] = 1;
            ++pushes_;
            aggregate_if_complete();
          } else {
            staleness[w] = updates_ - std::min(updates_, h.version);
            Codec::decode(payload, std::span<T>(sum));
            apply(std::span<const T>(sum));
            ++pushes_;
            if (rejoined[w]) ++pushes_after_rejoins_;
            ++clock[w];
            pending[w] = 1;
            release();
          }
          break;
        default:
          throw TransportError("parameter server " + std::to_string(e.rank()) + ": message of unknown kind " +
                               std::to_string(h.kind) + " from worker " + std::to_string(w));
      }
      if (reduces) rounds.answer_if_complete(e, done, drop);
      if (reduces) admit_waiting();
    }
    for (std::size_t w = 0; w < workers; ++w) {
      if (!joining[w]) continue;
      try {
        send_full(w, PsHeader::too_late);
      } catch (const PeerLostError&) {
      }
    }
    if (rejoins_ > 0) {
      log_message(LogLevel::info, "parameter server " + std::to_string(e.rank()),
                  "applied " + std::to_string(pushes_after_rejoins_) + " pushes from rejoined workers");
    }
  }

 private:
  Range shard_;
  Buffer<T> params_;
  optimizer_state state_;
  std::vector<TensorInfo> tensors_;
  std::vector<TensorInfo> trainable_;  // tensors_ without the state ones, rebuilt at each update
  std::uint64_t updates_ = 0;
  std::uint64_t pushes_ = 0;
  std::uint64_t rejoins_ = 0, pushes_after_rejoins_ = 0;
  std::vector<std::string> dropped_;
  std::optional<bool> continue_without_lost_workers_;
};

/// A worker's side of the protocol with every server.
template <class T, class Codec>
class ParameterServerClient {
 public:
  struct PullInfo {
    std::uint64_t steps_ahead = 0, staleness = 0;
  };

  ParameterServerClient(std::vector<Range> shards, std::size_t first_server_rank)
      : shards_(std::move(shards)), first_server_(first_server_rank), versions_(shards_.size(), 0) {
    std::size_t widest = 0;
    for (const auto& s : shards_) widest = std::max(widest, s.size());
    out_.resize(PsHeader::size + Codec::encoded_size(widest));
    in_.resize(std::max(PsHeader::size + Codec::encoded_size(widest), PsHeader::size + widest * sizeof(T)));
  }

  const std::vector<Range>& shards() const noexcept { return shards_; }

  /// Pushes shard s of `gradients` (the whole buffer) to its server.
  template <Transport E>
  void push(E& e, std::size_t s, std::span<const T> gradients) {
    const Range r = shards_[s];
    send_push(e, s, [&](std::span<std::byte> payload) { Codec::encode(gradients.subspan(r.begin, r.size()), payload); });
  }
  /// push() of gradients already in the codec's wire format: `codes` encodes the whole buffer, in
  /// a codec of fixed width with no header of its own (so value i's code is at encoded_size(i)),
  /// as a GPU's kernels leave it (cuda::Engine::pushed_gradient_codes).
  template <Transport E>
  void push_encoded(E& e, std::size_t s, std::span<const std::byte> codes) {
    const Range r = shards_[s];
    const std::size_t at = Codec::encoded_size(r.begin), bytes = Codec::encoded_size(r.size());
    if (at > codes.size() || bytes > codes.size() - at)
      throw ShapeError("parameter-server push of shard " + std::to_string(s) + ": its codes end at byte " +
                       std::to_string(at + bytes) + " of " + std::to_string(codes.size()));
    send_push(e, s, [&](std::span<std::byte> payload) { std::memcpy(payload.data(), codes.data() + at, bytes); });
  }

  /// Receives shard s of the parameters after a push (as the policy's codec carries them).
  template <Transport E>
  PullInfo pull(E& e, std::size_t s, std::span<T> parameters) {
    return pull_encoded(e, s, [&](std::size_t begin, std::span<const std::byte> payload) {
      Codec::decode(payload, parameters.subspan(begin, shards_[s].size()));
    });
  }
  /// pull() that hands the shard over in the codec's wire format: decode(first value's index,
  /// bytes) decodes it (on a GPU: cuda::Engine::decode_pulled_parameters).
  template <Transport E, class Decode>
  PullInfo pull_encoded(E& e, std::size_t s, Decode&& decode) {
    const Range r = shards_[s];
    const std::size_t size = PsHeader::size + Codec::encoded_size(r.size());
    e.recv(first_server_ + s, protocol_tags::ps_reply, std::span<std::byte>(in_).first(size));
    const PsHeader h = PsHeader::read(in_.data());
    expect_reply(h, e.rank(), s);
    versions_[s] = h.version;
    decode(r.begin, std::span<const std::byte>(in_).subspan(PsHeader::size, size - PsHeader::size));
    return {h.steps_ahead, h.staleness};
  }

  /// Asks every server to save its shard as part of the checkpoint set of `step`; returns the
  /// indices of the servers that say they could not. The parameters are left alone (the replies'
  /// full-precision shards are not copied in: that would change what a lossy codec's run does).
  template <Transport E>
  std::vector<std::size_t> checkpoint(E& e, std::uint64_t step) {
    for (std::size_t s = 0; s < shards_.size(); ++s) {
      const std::size_t size = PsHeader::size + Codec::encoded_size(shards_[s].size());
      std::fill(out_.begin(), out_.begin() + static_cast<std::ptrdiff_t>(size), std::byte{0});
      PsHeader{PsHeader::checkpoint, 0, step, 0, 0}.write(out_.data());
      e.send(first_server_ + s, protocol_tags::ps_push, std::span<const std::byte>(out_).first(size));
    }
    std::vector<std::size_t> failed;
    for (std::size_t s = 0; s < shards_.size(); ++s) {
      const std::size_t size = PsHeader::size + shards_[s].size() * sizeof(T);
      e.recv(first_server_ + s, protocol_tags::ps_full_reply, std::span<std::byte>(in_).first(size));
      const PsHeader h = PsHeader::read(in_.data());
      expect_reply(h, e.rank(), s);
      if (!(h.flags & PsHeader::saved)) failed.push_back(s);
    }
    return failed;
  }

  /// Sums the first `summed` of `values` and maximises the rest over the workers, through server 0
  /// (ps_reduce.hpp): every worker server 0 still counts takes part, each in the same order of
  /// rounds. Returns who contributed (the same list on each of them).
  template <Transport E>
  PsReduceAnswer reduce(E& e, std::span<double> values, std::size_t summed) {
    const std::size_t size = PsHeader::size + Codec::encoded_size(shards_[0].size());
    PsReduceAnswer a = ps_reduce(e, first_server_, round_, values, summed, std::span<std::byte>(out_).first(size));
    ++round_;
    return a;
  }

  /// Where a rejoining worker goes on (server 0's word).
  struct RejoinPoint {
    std::uint64_t position = 0;  ///< steps into the fit: epoch and batch, with the steps per epoch
    std::uint64_t round = 0;     ///< the next reduction round
  };
  /// A lost worker that restarted: says hello with the `rejoining` flag to server 0 (which answers
  /// at a clean boundary, see ParameterServerShard::serve), then to the others; takes every
  /// shard in full precision and the next reduction round. Empty when the job is finishing.
  template <Transport E>
  std::optional<RejoinPoint> rejoin(E& e, std::uint64_t steps_per_epoch, std::span<T> parameters) {
    RejoinPoint at;
    for (std::size_t s = 0; s < shards_.size(); ++s) {
      const std::size_t out_size = PsHeader::size + Codec::encoded_size(shards_[s].size());
      std::fill(out_.begin(), out_.begin() + static_cast<std::ptrdiff_t>(out_size), std::byte{0});
      PsHeader{PsHeader::hello, PsHeader::rejoining, steps_per_epoch, at.position, 0}.write(out_.data());
      e.send(first_server_ + s, protocol_tags::ps_push, std::span<const std::byte>(out_).first(out_size));
      const Range r = shards_[s];
      const std::size_t size = PsHeader::size + r.size() * sizeof(T);
      e.recv(first_server_ + s, protocol_tags::ps_full_reply, std::span<std::byte>(in_).first(size));
      const PsHeader h = PsHeader::read(in_.data());
      expect_reply(h, e.rank(), s);
      if (h.flags & PsHeader::too_late) return std::nullopt;
      if (s == 0) at = {h.steps_ahead, h.staleness};
      versions_[s] = h.version;
      if (r.size()) std::memcpy(parameters.data() + r.begin, in_.data() + PsHeader::size, r.size() * sizeof(T));
    }
    round_ = at.round;
    return at;
  }

  /// hello (at the start of a fit) or done (at its end): every server answers with its shard in
  /// full precision, so a worker starts from, and ends with, exactly the servers' parameters.
  template <Transport E>
  void exchange_full(E& e, PsHeader::Kind kind, std::span<T> parameters) {
    for (std::size_t s = 0; s < shards_.size(); ++s) {
      const std::size_t size = PsHeader::size + Codec::encoded_size(shards_[s].size());
      std::fill(out_.begin(), out_.begin() + static_cast<std::ptrdiff_t>(size), std::byte{0});
      PsHeader{kind, 0, 0, 0, 0}.write(out_.data());
      e.send(first_server_ + s, protocol_tags::ps_push, std::span<const std::byte>(out_).first(size));
    }
    for (std::size_t s = 0; s < shards_.size(); ++s) {
      const Range r = shards_[s];
      const std::size_t size = PsHeader::size + r.size() * sizeof(T);
      e.recv(first_server_ + s, protocol_tags::ps_full_reply, std::span<std::byte>(in_).first(size));
      const PsHeader h = PsHeader::read(in_.data());
      expect_reply(h, e.rank(), s);
      versions_[s] = h.version;
      if (r.size()) std::memcpy(parameters.data() + r.begin, in_.data() + PsHeader::size, r.size() * sizeof(T));
    }
  }

 private:
  /// A push of shard s: the header, then fill(payload) writes the shard's encoding.
  template <Transport E, class Fill>
  void send_push(E& e, std::size_t s, Fill&& fill) {
    const std::size_t size = PsHeader::size + Codec::encoded_size(shards_[s].size());
    PsHeader{PsHeader::push, 0, versions_[s], 0, 0}.write(out_.data());
    fill(std::span<std::byte>(out_).subspan(PsHeader::size, size - PsHeader::size));
    e.send(first_server_ + s, protocol_tags::ps_push, std::span<const std::byte>(out_).first(size));
  }
  void expect_reply(const PsHeader& h, std::size_t rank, std::size_t s) const {
    if (h.kind != PsHeader::reply)
      throw TransportError("worker " + std::to_string(rank) + ": server " + std::to_string(first_server_ + s) +
                           " answered with a message of kind " + std::to_string(h.kind));
  }

  std::vector<Range> shards_;
  std::size_t first_server_;
  std::vector<std::uint64_t> versions_;
  std::vector<std::byte> out_, in_;
  std::uint64_t round_ = 0;  ///< reductions run so far (server 0 counts them too)
};

}  // namespace flotilla::detail
#endif  // FLOTILLA_TOPOLOGY_DETAIL_PARAMETERSERVER_HPP_INCLUDED
