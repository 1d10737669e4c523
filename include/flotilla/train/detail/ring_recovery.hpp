// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_DETAIL_RINGRECOVERY_HPP_INCLUDED
#define FLOTILLA_TRAIN_DETAIL_RINGRECOVERY_HPP_INCLUDED
// What synchronous ring training does when a worker is lost (TrainerOptions::on_worker_loss,
// train/worker_loss.hpp), and the survivors' agreement on who is left (docs/reliability.md,
// "Continuing with the survivors").
//
// A synchronous job cannot simply wait out a lost worker: every update needs every worker's
// gradients. By default the job stops, every survivor naming the lost rank, its host and the
// operation (transport/tcp.hpp). With WorkerLoss::continue_with_survivors over TCP the survivors
//  1. agree on who is left (RingRecovery::agree below: reports to a coordinator, the lowest rank
//     each believes alive, which answers with the union of what it heard);
//  2. re-form the ring over them (transport::LiveGroup: fresh tags, so nothing of the interrupted
//     operation is ever taken for part of a later one);
//  3. take the state of the survivor that got furthest (parameters, optimizer state, step, data
//     position), so that every survivor continues from identical bits, and redo the interrupted
//     update from it with the data re-sharded among fewer workers.
// Losses are crash failures: a process killed, or stalled past the heartbeat bound and then
// treated as gone. The group goes on only while more than half of it is left, so that a worker cut
// off from the others (which sees all of them lost) cannot go on alone beside them.
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/message_tags.hpp"
#include "flotilla/train/history.hpp"
#include "flotilla/transport/group.hpp"
#include "flotilla/transport/live_group.hpp"
#include "flotilla/train/worker_loss.hpp"

namespace flotilla {
namespace detail {

/// The workers' group: a ring can re-form, parameter-server workers keep theirs.
template <class E, bool parameter_server>
using worker_group_t = std::conditional_t<parameter_server, transport::Group<E>, transport::LiveGroup<E>>;

namespace loss_tags {
inline constexpr Tag report = reserved_tag("loss_report");
inline constexpr Tag decision = reserved_tag("loss_decision");
}  // namespace loss_tags

/// How far a survivor got: updates applied, and epochs recorded in this fit() call. The survivor
/// that got furthest is the one the others take their state from.
struct LossProgress {
  std::uint64_t step = 0;
  std::uint64_t records = 0;
  friend bool operator<(const LossProgress& a, const LossProgress& b) noexcept {
    return a.step != b.step ? a.step < b.step : a.records < b.records;
  }
};

/// What the survivors agreed on.
struct LossDecision {
  /// Job ranks of the group that are gone (empty: nobody was lost; a check-in).
  std::vector<std::size_t> lost;
  /// The group rank, in the re-formed group, of the survivor whose state everyone takes.
  std::size_t leader = 0;
  bool changed() const noexcept { return !lost.empty(); }
};

/// The survivors' agreement on the live set of a LiveGroup. Every member of the group's current
/// generation calls agree(), either because an operation failed with a lost peer or to check in
/// at the end of training (so that no rank leaves while another still needs it); all get the same
/// decision, and the group re-forms as its next generation.
///
/// Each member sends what it knows (its lost peers and its progress) to the coordinator, the
/// lowest member it believes alive, which receives from every member it believes alive, takes the
/// union, and sends the decision back to everyone that reported. A member whose coordinator is
/// lost reports to the next. A member that believes a peer alive when it is not finds out by
/// waiting on it (its connection closes, or it stays silent past the heartbeat bound), so that
/// every wait is bounded: by the heartbeat bound for a lost peer, by the transport's timeout for
/// a live one that never answers.
template <class E>
  requires SurvivableEndpoint<E>
class RingRecovery {
 public:
  explicit RingRecovery(transport::LiveGroup<E>& group) : group_(group) {
    group_.endpoint().continue_without_lost_peers(true);
    group_.endpoint().stop_on_any_lost_peer(true);
  }

  /// Agrees on the survivors (`lost`: the peer whose loss brought this rank here, if any) and
  /// re-forms the group over them. Throws TransportError when this rank cannot go on: the others
  /// declared it lost, or too few are left.
  LossDecision agree(std::optional<std::size_t> lost, LossProgress mine) {
    E& e = group_.endpoint();
    const std::size_t world = e.size(), me = e.rank();
    const std::vector<std::size_t> members = group_.members();
    std::vector<std::uint64_t> gone(world, 0);
    auto mark = [&](std::size_t p) {
      if (p < world && p != me) gone[p] = 1;
    };
    if (lost) mark(*lost);
    for (const std::size_t p : e.lost_peers()) mark(p);
    const Tag report_tag = group_.wire_tag(loss_tags::report), decision_tag = group_.wire_tag(loss_tags::decision);
    // Decision: continue (1) or not (0), the leader's job rank, then one flag per job rank.
    std::vector<std::uint64_t> decision(2 + world, 0);
    std::size_t coordinator = me;
    for (;;) {
      coordinator = *std::find_if(members.begin(), members.end(), [&](std::size_t m) { return gone[m] == 0; });
      if (coordinator == me) {
        decision = coordinate(members, gone, mine, report_tag, decision_tag);
        break;
      }
      std::vector<std::uint64_t> report(2 + world, 0);
      report[0] = mine.step;
      report[1] = mine.records;
      std::copy(gone.begin(), gone.end(), report.begin() + 2);
      try {
        e.send(coordinator, report_tag, std::as_bytes(std::span<const std::uint64_t>(report)));
      } catch (const PeerLostError& x) {
        mark(x.peer());  // a duplicate report, if this one went out whole, is never received
        continue;
      }
      bool decided = false;
      for (;;) {
        try {
          e.recv(coordinator, decision_tag, std::as_writable_bytes(std::span<std::uint64_t>(decision)));
          decided = true;
          break;
        } catch (const PeerLostError& x) {
          mark(x.peer());
          if (x.peer() == coordinator) break;  // report to the next one
        }
      }
      if (decided) break;
    }

    LossDecision d;
    std::vector<std::size_t> survivors;
    for (const std::size_t m : members) {
      if (decision[2 + m] != 0)
        d.lost.push_back(m);
      else
        survivors.push_back(m);
    }
    if (decision[2 + me] != 0)
      throw TransportError("rank " + std::to_string(me) + ": the other workers went on without this one (rank " +
                           std::to_string(coordinator) + " coordinated), after losing contact with it");
    if (decision[0] == 0)
      throw TransportError("rank " + std::to_string(me) + ": lost " + ranks_text(d.lost) + " of " +
                           std::to_string(members.size()) + " workers; only " + std::to_string(survivors.size()) +
                           " remain, and a synchronous job goes on only with more than half of its workers (so that "
                           "workers cut off from each other never go on as two jobs)");
    const auto leader = static_cast<std::size_t>(decision[1]);
    group_.reform(survivors);
    d.leader = static_cast<std::size_t>(std::find(survivors.begin(), survivors.end(), leader) - survivors.begin());
    return d;
  }

  static std::string ranks_text(const std::vector<std::size_t>& ranks) {
    std::string s = ranks.size() == 1 ? "rank " : "ranks ";
    for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
    return s;
  }

 private:
  /// The coordinator's part: every report, then the decision to everyone that reported.
  std::vector<std::uint64_t> coordinate(const std::vector<std::size_t>& members, std::vector<std::uint64_t>& gone,
                                        LossProgress mine, Tag report_tag, Tag decision_tag) {
    E& e = group_.endpoint();
    const std::size_t world = e.size(), me = e.rank();
    std::vector<std::optional<LossProgress>> progress(world);
    progress[me] = mine;
    std::vector<std::size_t> reported;
    std::vector<std::uint64_t> report(2 + world);
    for (const std::size_t m : members) {
      while (m != me && gone[m] == 0 && !progress[m]) {
        try {
          e.recv(m, report_tag, std::as_writable_bytes(std::span<std::uint64_t>(report)));
        } catch (const PeerLostError& x) {
          if (x.peer() < world && x.peer() != me) gone[x.peer()] = 1;
          continue;
        }
        progress[m] = LossProgress{report[0], report[1]};
        reported.push_back(m);
        for (std::size_t p = 0; p < world; ++p)
          if (report[2 + p] != 0 && p != m) gone[p] = 1;  // (a member that reported gone itself is not)
      }
    }
    // A member that reported, and that another reported lost, is out: its peers cannot reach it.
    std::size_t alive = 0;
    std::size_t leader = me;
    for (const std::size_t m : members) {
      if (gone[m] != 0) continue;
      ++alive;
      if (*progress[leader] < *progress[m]) leader = m;  // ties: the lowest rank, the first seen
    }
    std::vector<std::uint64_t> decision(2 + world, 0);
    decision[0] = 2 * alive > members.size() ? 1 : 0;
    decision[1] = leader;
    std::copy(gone.begin(), gone.end(), decision.begin() + 2);
    for (const std::size_t m : reported) {
      try {
        e.send(m, decision_tag, std::as_bytes(std::span<const std::uint64_t>(decision)));
      } catch (const PeerLostError&) {
        // Lost after reporting: the others find out in the next operation, and agree again.
      }
    }
    return decision;
  }

  transport::LiveGroup<E>& group_;
};

/// RingRecovery<E> where a trainer can go on without a lost worker, else an empty stand-in (named
/// only where chosen: RingRecovery<E> must not be named for an endpoint that cannot survive).
struct NoRecovery {};
template <class E, bool enabled>
struct ring_recovery_for {
  using type = NoRecovery;
};
template <class E>
struct ring_recovery_for<E, true> {
  using type = RingRecovery<E>;
};

/// An epoch record as bytes, for a survivor that missed the end of an epoch to take from one that
/// recorded it (so that every survivor's history stays the same).
inline std::vector<std::byte> record_bytes(const EpochRecord& r) {
  std::vector<std::byte> out;
  auto put = [&](const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    out.insert(out.end(), b, b + n);
  };
  auto num = [&](double v) { put(&v, sizeof v); };
  const double none = std::numeric_limits<double>::quiet_NaN();
  const std::uint64_t ints[2] = {r.epoch, r.step};
  put(ints, sizeof ints);
  for (const double v : {r.train_loss, r.train_accuracy, r.val_loss.value_or(none), r.val_accuracy.value_or(none),
                         r.samples_per_second, r.seconds, r.learning_rate})
    num(v);
  const std::uint64_t flags = (r.val_loss ? 1u : 0u) | (r.val_accuracy ? 2u : 0u), extras = r.extra.size();
  put(&flags, sizeof flags);
  put(&extras, sizeof extras);
  for (const auto& [name, value] : r.extra) {
    const std::uint64_t n = name.size();
    put(&n, sizeof n);
    put(name.data(), name.size());
    num(value);
  }
  return out;
}

inline EpochRecord record_from_bytes(std::span<const std::byte> in) {
  std::size_t at = 0;
  auto get = [&](void* p, std::size_t n) {
    if (n > in.size() - at) throw TransportError("an epoch record from the leading worker is cut short");
    std::memcpy(p, in.data() + at, n);
    at += n;
  };
  auto num = [&] {
    double v = 0;
    get(&v, sizeof v);
    return v;
  };
  EpochRecord r;
  std::uint64_t ints[2] = {};
  get(ints, sizeof ints);
  r.epoch = ints[0];
  r.step = ints[1];
  r.train_loss = num();
  r.train_accuracy = num();
  const double val_loss = num(), val_accuracy = num();
  r.samples_per_second = num();
  r.seconds = num();
  r.learning_rate = num();
  std::uint64_t flags = 0, extras = 0;
  get(&flags, sizeof flags);
  get(&extras, sizeof extras);
  if (flags & 1u) r.val_loss = val_loss;
  if (flags & 2u) r.val_accuracy = val_accuracy;
  for (std::uint64_t i = 0; i < extras; ++i) {
    std::uint64_t n = 0;
    get(&n, sizeof n);
    if (n > in.size() - at) throw TransportError("an epoch record from the leading worker is cut short");
    std::string name(reinterpret_cast<const char*>(in.data() + at), static_cast<std::size_t>(n));
    at += static_cast<std::size_t>(n);
    r.extra.emplace_back(std::move(name), num());
  }
  return r;
}

}  // namespace detail
}  // namespace flotilla
#endif  // FLOTILLA_TRAIN_DETAIL_RINGRECOVERY_HPP_INCLUDED
