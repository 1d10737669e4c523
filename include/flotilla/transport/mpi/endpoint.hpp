// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_MPI_ENDPOINT_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_MPI_ENDPOINT_HPP_INCLUDED
// One rank's endpoint of an MPI job (Endpoint): the Transport concept's operations over
// non-blocking MPI calls polled against a deadline, the routing of flotilla's tags onto MPI's, and
// allreduce_sum through MPI_Allreduce under a watchdog.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/transport/mpi/messages.hpp"
#include "flotilla/transport/mpi/options.hpp"
#include "flotilla/transport/mpi/environment.hpp"
#include "flotilla/transport/mpi/waiting.hpp"

namespace flotilla::transport::mpi {

/// One rank's endpoint of an MPI job. See the Transport concept for the semantics of each
/// operation; the differences a user may notice are:
///  - `send` may wait until the receiver has posted the matching receive (MPI's rendezvous, for
///    messages above the library's eager limit, a few KiB to 64 KiB): two ranks that send to each
///    other before either receives must use `sendrecv`, as with any MPI program;
///  - tags: see `route` below;
///  - `counters()`: MPI's own framing is invisible, so header bytes count only the 4-byte tag that a
///    folded message carries (none on Open MPI with its default transports, whose MPI_TAG_UB is
///    2^31 - 1); allreduce_sum counts an estimate (see there).
///
/// After a wait times out with a transfer still in flight (a send MPI could not cancel, a message
/// half received, a barrier or allreduce other ranks may still enter), MPI may yet read or write the
/// buffer, so the endpoint refuses any further operation; the job is expected to end (run() aborts
/// it). A receive that times out before any message arrived leaves the endpoint usable.
class Endpoint {
 public:
  /// Works on duplicates of `base` (a collective call over it); MPI must be initialised with at least
  /// MPI_THREAD_SERIALIZED (Mpi::run sees to that).
  explicit Endpoint(MPI_Comm base = MPI_COMM_WORLD, Options options = {}) : options_(options) {
    detail::mpi_ensure_initialized();
    if (base == MPI_COMM_NULL) throw ConfigError("mpi: the communicator is MPI_COMM_NULL");
    int r = 0, n = 0;
    MPI_Comm_rank(base, &r);
    MPI_Comm_size(base, &n);
    rank_ = static_cast<std::size_t>(r);
    size_ = static_cast<std::size_t>(n);
    // Three duplicates (see route()): the user's tags, flotilla's reserved tags, and the folded
    // tags of either. The program's own messages on `base` can match none of them.
    for (MPI_Comm* c : {&user_comm_, &reserved_comm_, &folded_comm_}) {
      check(MPI_Comm_dup(base, c), "MPI_Comm_dup", "setup");
      // Errors come back as return codes, to become TransportErrors naming the operation, instead
      // of aborting the job from inside MPI.
      MPI_Comm_set_errhandler(*c, MPI_ERRORS_RETURN);
    }
    // MPI_TAG_UB is an attribute of MPI_COMM_WORLD (the same for every communicator).
    void* value = nullptr;
    int found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found);
    const auto library_ub = found ? static_cast<std::uint32_t>(*static_cast<int*>(value)) : 32767u;  // MPI's minimum
    tag_ub_ = std::min(library_ub, options_.max_mpi_tag);
    // The ranks that can share memory with this one: MPI's notion of "on this host".
    check(MPI_Comm_split_type(base, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host_comm_), "MPI_Comm_split_type", "setup");
    MPI_Comm_set_errhandler(host_comm_, MPI_ERRORS_RETURN);
    int on_host = 1, host_rank = 0;
    MPI_Comm_size(host_comm_, &on_host);
    MPI_Comm_rank(host_comm_, &host_rank);
    ranks_on_host_ = static_cast<std::size_t>(on_host);
    host_rank_ = static_cast<std::size_t>(host_rank);
    gather_hosts();
    find_host_leaders();
  }

  ~Endpoint() {
    // Stranded requests (see the class comment) are left to MPI: freeing their communicators is
    // allowed and deferred until they complete, and the process is about to be aborted anyway.
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    for (MPI_Comm* c : {&user_comm_, &reserved_comm_, &folded_comm_, &host_comm_})
      if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  }
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  std::size_t rank() const noexcept { return rank_; }
  std::size_t size() const noexcept { return size_; }
  /// How many of the job's ranks share this rank's host, this one included (KnowsRanksOnHost):
  /// the size of MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), taken when the endpoint was made.
  std::size_t ranks_on_this_host() const noexcept { return ranks_on_host_; }
  TrafficCounters counters() const noexcept { return counters_; }
  const Options& options() const noexcept { return options_; }
  /// False once a wait timed out with a transfer in flight (see the class comment).
  bool usable() const noexcept { return broken_.empty(); }
  /// The host rank `peer` runs on (MPI_Get_processor_name, gathered when the endpoint was made).
  const std::string& host(std::size_t peer) const { return hosts_.at(peer); }
  /// The largest MPI tag in use: MPI_TAG_UB (Open MPI's default transports: 2^31 - 1), or
  /// options.max_mpi_tag when smaller.
  std::uint32_t tag_upper_bound() const noexcept { return tag_ub_; }

  void send(std::size_t peer, Tag tag, std::span<const std::byte> bytes) {
    const Op op{"send", peer, tag, true};
    check_usable(op);
    check_peer(op);
    Outgoing out(route(tag), tag, bytes);
    MPI_Request request = post(out, peer, op);
    if (!poll(deadline(), [&] { return test(request, op) ? detail::MpiWait::done : detail::MpiWait::busy; })) {
      abandon_send(request, out, op);
      throw TransportError(who() + ": " + describe(op) + " timed out after " + timeout_text() + " (" +
                           peer_name(peer) + " did not receive it: it is stopped, hung, or waiting elsewhere)");
    }
    count_sent(out);
  }

  void recv(std::size_t peer, Tag tag, std::span<std::byte> buffer) {
    const Op op{"recv", peer, tag};
    check_usable(op);
    check_peer(op);
    receive(op, buffer);
  }

  std::size_t recv_any(Tag tag, std::span<std::byte> buffer) {
    const Op op{"recv_any", any_peer, tag};
    check_usable(op);
    return receive(op, buffer);
  }

  void sendrecv(std::size_t to, Tag tag, std::span<const std::byte> out, std::size_t from, std::span<std::byte> in) {
    const Op send_op{"sendrecv", to, tag, true}, recv_op{"sendrecv", from, tag};
    check_usable(send_op);
    check_peer(send_op);
    check_peer(recv_op);
    Outgoing outgoing(route(tag), tag, out);
    MPI_Request request = post(outgoing, to, send_op);
    Incoming incoming(route(tag), static_cast<int>(from), tag, in);
    bool sent = false;
    // Both halves progress in one loop, so neither waits for the other: the ring step, where both
    // neighbours send at once, cannot deadlock.
    bool done = false;
    try {
      done = poll(deadline(), [&] {
        sent = sent || test(request, send_op);
        const detail::MpiWait received = progress(incoming, recv_op);
        if (sent && received == detail::MpiWait::done) return detail::MpiWait::done;
        return sent ? received : detail::MpiWait::busy;
      });
    } catch (...) {
      // The receive failed (an MPI error): the send may still be reading `out`.
      if (!sent) abandon_send(request, outgoing, send_op);
      throw;
    }
    if (!done) {
      std::string missing;
      if (!sent) missing = peer_name(to) + " did not receive the send";
      if (!incoming.complete) missing += std::string(missing.empty() ? "" : "; ") + waiting_for(incoming, from);
      if (!sent) abandon_send(request, outgoing, send_op);
      if (incoming.matched && !incoming.complete) strand(incoming, recv_op);
      throw TransportError(who() + ": sendrecv to rank " + std::to_string(to) + " and from rank " +
                           std::to_string(from) + " (tag " + std::to_string(tag) + ") timed out after " +
                           timeout_text() + " (" + missing + ")");
    }
    count_sent(outgoing);
    finish(incoming, recv_op);
  }

  void barrier() {
    const Op op{"barrier", any_peer, 0};
    check_usable(op);
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Ibarrier(user_comm_, &request), "MPI_Ibarrier", op);
    // Busy, never idle: the barrier's rounds advance only while this rank polls.
    if (!poll(deadline(), [&] { return test(request, op) ? detail::MpiWait::done : detail::MpiWait::busy; })) {
      strand(request, op);
      throw TransportError(who() + ": barrier timed out after " + timeout_text() + " (some rank did not enter it: " +
                           every_rank() + ")");
    }
  }

  /// Sums `values` over all ranks, in place, with MPI_Allreduce, once every rank has arrived within
  /// the deadline (see allreduce() below). Every rank must pass the same number of values. The
  /// counters add what a ring allreduce would move, 2(N-1)/N of the bytes each way in 2(N-1)
  /// messages: an estimate, since the MPI library picks its own algorithm (recursive doubling,
  /// Rabenseifner, ring) and moves what that algorithm moves.
  /// HostHierarchy: the lowest rank of every host, ascending, when the job spans hosts and some
  /// host has several ranks (and Options::hierarchical); empty otherwise.
  std::span<const std::size_t> host_leaders() const noexcept { return host_leaders_; }
  std::size_t host_piece_bytes() const noexcept { return options_.host_piece_bytes; }
  /// Across hosts, collective::ring_allreduce hands sums below this to MPI_Allreduce.
  std::size_t hierarchical_min_bytes() const noexcept { return options_.hierarchical_min_bytes; }
  /// The ranks of this host sum `values` into its leader (MPI_Reduce over the host's communicator).
  void reduce_to_host_leader(std::span<float> values) {
    bounded({"reduce_to_host_leader", any_peer, 0}, values.size(), host_comm_, [&](const Op& op) {
      check(MPI_Reduce(host_rank_ == 0 ? MPI_IN_PLACE : values.data(), values.data(), static_cast<int>(values.size()),
                       MPI_FLOAT, MPI_SUM, 0, host_comm_),
            "MPI_Reduce", op);
    });
    count_inside_host(values.size() * sizeof(float), host_rank_ == 0);
  }
  /// The leader's `values` go to every rank of its host (MPI_Bcast over the host's communicator).
  void broadcast_from_host_leader(std::span<float> values) {
    bounded({"broadcast_from_host_leader", any_peer, 0}, values.size(), host_comm_, [&](const Op& op) {
      check(MPI_Bcast(values.data(), static_cast<int>(values.size()), MPI_FLOAT, 0, host_comm_), "MPI_Bcast", op);
    });
    count_inside_host(values.size() * sizeof(float), host_rank_ != 0);
  }

  void allreduce_sum(std::span<float> values) { allreduce(values); }
  void allreduce_sum(std::span<double> values) { allreduce(values); }
  /// Above this size ring_allreduce prefers flotilla's ring (MpiOptions::native_allreduce_max_bytes).
  std::size_t native_allreduce_max_bytes() const noexcept { return options_.native_allreduce_max_bytes; }

 private:
  static constexpr std::size_t any_peer = static_cast<std::size_t>(-1);
  static constexpr std::size_t frame_bytes = sizeof(Tag);  // the tag a folded message carries

  struct Op {
    const char* name;
    std::size_t peer;  // any_peer: from any rank (recv_any), or none (collectives)
    Tag tag;
    bool outgoing = false;  // "to rank" rather than "from rank"
  };

  /// Where a flotilla tag travels: which communicator, as which MPI tag, and whether folded.
  struct Route {
    MPI_Comm comm;
    int tag;
    bool folded;
  };

  /// A send's buffer and, for a folded message, its frame (on the heap, so that a stranded send
  /// can keep it: see strand()).
  struct Outgoing {
    Outgoing(Route r, Tag t, std::span<const std::byte> b)
        : route(r), header(r.folded ? std::make_unique<Tag>(t) : nullptr), bytes(b) {}
    Route route;
    std::unique_ptr<Tag> header;
    std::span<const std::byte> bytes;
  };

  /// A receive in progress: first a matched probe (MPI_Improbe), which tells the message's size
  /// before any byte is copied, then MPI_Imrecv of exactly that message, into the caller's buffer
  /// or, when the sizes differ, into `scratch`, so that the wrong-sized message is consumed and the
  /// next one on the link arrives intact. A folded message is received with its tag, and set aside
  /// in the endpoint's stash when the tag is another's.
  struct Incoming {
    Incoming(Route r, int src, Tag t, std::span<std::byte> b)
        : route(r), source(src), tag(t), buffer(b), header(r.folded ? std::make_unique<Tag>(0) : nullptr) {}
    Route route;
    int source;  // an MPI rank or MPI_ANY_SOURCE
    Tag tag;
    std::span<std::byte> buffer;
    MPI_Request request = MPI_REQUEST_NULL;
    bool matched = false, complete = false;
    std::size_t bytes = 0;  // the payload's size, without the frame
    int from = -1;
    std::unique_ptr<Tag> header;  // a folded message's tag, as received (on the heap: see strand())
    std::vector<std::byte> scratch;
    std::optional<detail::MpiBytes> type;
    std::optional<detail::MpiFramed> framed;
  };

  /// A folded message that arrived while a receive waited for another tag with the same MPI tag.
  struct Stashed {
    int from;
    Tag tag;
    std::vector<std::byte> bytes;
  };

  std::chrono::steady_clock::time_point deadline() const { return std::chrono::steady_clock::now() + options_.timeout; }
  std::string timeout_text() const { return std::to_string(options_.timeout.count()) + " ms"; }

  std::string who() const { return "mpi rank " + std::to_string(rank_) + " of " + std::to_string(size_); }
  std::string peer_name(std::size_t peer) const { return "rank " + std::to_string(peer) + " on host " + host(peer); }
  /// Every other rank by host, for a wait on any of them or on a collective, whose missing ranks
  /// MPI does not tell: "ranks 1, 2 on host a; rank 3 on host b". Long lists are cut short.
  std::string every_rank() const {
    std::vector<std::pair<std::string, std::vector<std::size_t>>> by_host;
    for (std::size_t r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      auto it = std::find_if(by_host.begin(), by_host.end(), [&](const auto& h) { return h.first == hosts_[r]; });
      if (it == by_host.end()) it = by_host.insert(by_host.end(), {hosts_[r], {}});
      it->second.push_back(r);
    }
    constexpr std::size_t most = 16;  // ranks named per host, and hosts named
    std::string s = "waiting on ";
    for (std::size_t h = 0; h < by_host.size() && h < most; ++h) {
      const auto& [name, ranks] = by_host[h];
      s += (h ? "; " : "") + std::string(ranks.size() == 1 ? "rank " : "ranks ");
      for (std::size_t i = 0; i < ranks.size() && i < most; ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
      if (ranks.size() > most) s += " and " + std::to_string(ranks.size() - most) + " more";
      s += " on host " + name;
    }
    if (by_host.size() > most) s += "; and ranks on " + std::to_string(by_host.size() - most) + " more hosts";
    return by_host.empty() ? "waiting on no other rank" : s;
  }

  /// Every rank's host, for messages that name a peer: a rank that stops, or hangs, is then found
  /// by its host as well as by its number. Each name is bounded by MPI_MAX_PROCESSOR_NAME.
  void gather_hosts() {
    std::vector<char> mine(MPI_MAX_PROCESSOR_NAME, '\0'), all(size_ * MPI_MAX_PROCESSOR_NAME, '\0');
    int length = 0;
    check(MPI_Get_processor_name(mine.data(), &length), "MPI_Get_processor_name", "setup");
    check(MPI_Allgather(mine.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                        user_comm_),
          "MPI_Allgather of the host names", "setup");
    hosts_.resize(size_);
    for (std::size_t r = 0; r < size_; ++r) {
      const char* name = all.data() + r * MPI_MAX_PROCESSOR_NAME;
      hosts_[r].assign(name, std::find(name, name + MPI_MAX_PROCESSOR_NAME, '\0'));
      if (hosts_[r].empty()) hosts_[r] = "(unnamed)";
    }
  }

  static std::string describe(const Op& op) {
    const std::string_view name(op.name);
    std::string s(name);
    if (name == "barrier" || name == "allreduce_sum") return s;
    if (op.outgoing)
      s += " to rank " + std::to_string(op.peer);
    else if (op.peer == any_peer)
      s += " from any rank";
    else
      s += " from rank " + std::to_string(op.peer);
    return s + " (tag " + std::to_string(op.tag) + ")";
  }

  void check(int rc, const char* call, const Op& op) const {
    if (rc != MPI_SUCCESS)
      throw TransportError(who() + ": " + describe(op) + ": " + call + " failed: " + detail::mpi_error_string(rc));
  }
  void check(int rc, const char* call, const char* what) const {
    if (rc != MPI_SUCCESS)
      throw TransportError(who() + ": " + what + ": " + call + " failed: " + detail::mpi_error_string(rc));
  }

  void check_peer(const Op& op) const {
    if (op.peer >= size_)
      throw TransportError(who() + ": " + describe(op) + ": there is no such rank, the job has " +
                           std::to_string(size_) + " ranks");
  }

  void check_usable(const Op& op) const {
    if (!broken_.empty())
      throw TransportError(who() + ": " + describe(op) + " refused: the endpoint is unusable since " + broken_);
  }

  /// Flotilla tags are 32-bit; MPI carries tags in [0, MPI_TAG_UB], and MPI_TAG_UB is as small as
  /// the standard allows (32767) on some libraries, 2^20 - 1 on Intel MPI, 2^23 - 1 on Open MPI
  /// over UCX, 2^31 - 1 on Open MPI's default transports. So:
  ///  - direct: the user's tags [0, 2^31) and flotilla's reserved tags [2^31, 2^32) travel on two
  ///    communicators, each as the offset from the start of its range, and every offset up to
  ///    MPI_TAG_UB travels as is. That is every tag on Open MPI's default transports, and the small
  ///    tags, which programs use most, everywhere;
  ///  - folded: a larger offset (flotilla's collectives number their tags from reserved_begin +
  ///    2^30) travels on a third communicator as the MPI tag (tag mod (MPI_TAG_UB + 1)), and the
  ///    message carries its flotilla tag in 4 bytes ahead of the payload (sent and received without
  ///    a copy, through a derived datatype). Different tags may share an MPI tag there; a receive
  ///    that gets a message for another tag sets it aside (a copy) for the receive that wants it,
  ///    and looks again. Messages with one tag share one MPI tag, so they stay in order.
  /// Refusing large tags instead would make flotilla's collectives unusable on such MPIs, and a
  /// table from tags to MPI tags would need the ranks to agree on it before every new tag.
  Route route(Tag tag) const {
    const bool reserved = tag >= tags::reserved_begin;
    const std::uint32_t offset = reserved ? tag - tags::reserved_begin : tag;
    if (offset <= tag_ub_) return {reserved ? reserved_comm_ : user_comm_, static_cast<int>(offset), false};
    return {folded_comm_, static_cast<int>(tag % (std::uint64_t{tag_ub_} + 1)), true};
  }

  /// Polls `step` (returning an MpiWait) until it is done or `until` passes: false on timeout.
  /// `step` is tried once more after the deadline, so that an answer that came during the last
  /// pause is not lost.
  template <class Step>
  static bool poll(std::chrono::steady_clock::time_point until, Step&& step) {
    detail::MpiBackoff backoff;
    for (;;) {
      const detail::MpiWait state = step();
      if (state == detail::MpiWait::done) return true;
      if (std::chrono::steady_clock::now() >= until) return step() == detail::MpiWait::done;
      backoff.pause(state);
    }
  }

  bool test(MPI_Request& request, const Op& op) const {
    int flag = 0;
    check(MPI_Test(&request, &flag, MPI_STATUS_IGNORE), "MPI_Test", op);
    return flag != 0;
  }

  MPI_Request post(Outgoing& out, std::size_t peer, const Op& op) {
    MPI_Request request = MPI_REQUEST_NULL;
    if (!out.route.folded) {
      const detail::MpiBytes type(out.bytes.size());
      check(MPI_Isend(out.bytes.data(), type.count(), type.type(), static_cast<int>(peer), out.route.tag,
                      out.route.comm, &request),
            "MPI_Isend", op);
    } else {
      const detail::MpiFramed framed(out.header.get(), out.bytes.data(), out.bytes.size());
      check(MPI_Isend(MPI_BOTTOM, 1, framed.type(), static_cast<int>(peer), out.route.tag, out.route.comm, &request),
            "MPI_Isend", op);
    }
    return request;
  }

  void count_sent(const Outgoing& out) {
    counters_.payload_bytes_sent += out.bytes.size();
    if (out.route.folded) counters_.header_bytes_sent += frame_bytes;
    ++counters_.messages_sent;
  }

  /// Hands a stashed message for `in` to it, if there is one (the oldest: messages with one tag
  /// from one rank stay in order).
  bool take_stashed(Incoming& in) {
    for (auto it = stash_.begin(); it != stash_.end(); ++it) {
      if (it->tag != in.tag || (in.source != MPI_ANY_SOURCE && it->from != in.source)) continue;
      in.from = it->from;
      in.bytes = it->bytes.size();
      if (in.bytes == in.buffer.size()) {
        if (in.bytes != 0) std::memcpy(in.buffer.data(), it->bytes.data(), in.bytes);
      } else {
        in.scratch = std::move(it->bytes);
      }
      stash_.erase(it);
      in.matched = in.complete = true;
      return true;
    }
    return false;
  }

  detail::MpiWait progress(Incoming& in, const Op& op) {
    if (in.complete) return detail::MpiWait::done;
    if (!in.matched) {
      if (in.route.folded && take_stashed(in)) return detail::MpiWait::done;
      int flag = 0;
      MPI_Message message = MPI_MESSAGE_NULL;
      MPI_Status status;
      check(MPI_Improbe(in.source, in.route.tag, in.route.comm, &flag, &message, &status), "MPI_Improbe", op);
      if (!flag) return detail::MpiWait::idle;
      MPI_Count count = 0;
      check(MPI_Get_elements_x(&status, MPI_BYTE, &count), "MPI_Get_elements_x", op);
      in.matched = true;
      in.from = status.MPI_SOURCE;
      std::size_t bytes = static_cast<std::size_t>(count);
      if (in.route.folded) {
        if (bytes < frame_bytes) {
          // Not one of ours: take it off the link, then say so.
          char sink[frame_bytes];
          MPI_Mrecv(sink, static_cast<int>(bytes), MPI_BYTE, &message, MPI_STATUS_IGNORE);
          throw TransportError(who() + ": " + describe(op) + ": a message of " + std::to_string(bytes) +
                               " bytes from rank " + std::to_string(in.from) +
                               " is too short for a folded message (it needs its 4-byte tag)");
        }
        bytes -= frame_bytes;
      }
      in.bytes = bytes;
      std::byte* target = in.buffer.data();
      if (in.bytes != in.buffer.size()) {
        in.scratch.resize(in.bytes);
        target = in.scratch.data();
      }
      if (!in.route.folded) {
        in.type.emplace(in.bytes);
        check(MPI_Imrecv(target, in.type->count(), in.type->type(), &message, &in.request), "MPI_Imrecv", op);
      } else {
        in.framed.emplace(in.header.get(), target, in.bytes);
        check(MPI_Imrecv(MPI_BOTTOM, 1, in.framed->type(), &message, &in.request), "MPI_Imrecv", op);
      }
    }
    if (!test(in.request, op)) return detail::MpiWait::busy;
    if (in.route.folded && *in.header != in.tag) {
      // Another tag's message on the same MPI tag: keep it for its own receive, and look again.
      Stashed kept{in.from, *in.header, {}};
      if (in.bytes == in.buffer.size())
        kept.bytes.assign(in.buffer.begin(), in.buffer.end());
      else
        kept.bytes = std::move(in.scratch);
      stash_.push_back(std::move(kept));
      counters_.header_bytes_received += frame_bytes;  // counted on arrival; its payload when taken
      in.matched = false;
      in.scratch.clear();
      in.type.reset();
      in.framed.reset();
      return detail::MpiWait::busy;
    }
    if (in.route.folded) counters_.header_bytes_received += frame_bytes;
    in.complete = true;
    return detail::MpiWait::done;
  }

  std::string waiting_for(const Incoming& in, std::size_t peer) const {
    if (in.matched) return "the message from " + peer_name(static_cast<std::size_t>(in.from)) + " did not finish arriving";
    return peer == any_peer ? "no message arrived, " + every_rank()
                            : "no message arrived from " + peer_name(peer) +
                                  ": it is stopped, hung, or waiting elsewhere";
  }

  std::size_t receive(const Op& op, std::span<std::byte> buffer) {
    Incoming in(route(op.tag), op.peer == any_peer ? MPI_ANY_SOURCE : static_cast<int>(op.peer), op.tag, buffer);
    if (!poll(deadline(), [&] { return progress(in, op); })) {
      if (in.matched) strand(in, op);
      throw TransportError(who() + ": " + describe(op) + " timed out after " + timeout_text() + " (" +
                           waiting_for(in, op.peer) + ")");
    }
    finish(in, op);
    return static_cast<std::size_t>(in.from);
  }

  /// Counts a completed receive, and reports a wrong size (after the message was consumed).
  void finish(const Incoming& in, Op op) {
    counters_.payload_bytes_received += in.bytes;
    ++counters_.messages_received;
    if (in.bytes != in.buffer.size()) {
      op.peer = static_cast<std::size_t>(in.from);
      throw TransportError(who() + ": " + describe(op) + " expected " + std::to_string(in.buffer.size()) +
                           " bytes, the message has " + std::to_string(in.bytes));
    }
  }

  /// A send that timed out: cancelled if MPI can (it may not, once the receiver has matched it, and
  /// Open MPI never cancels sends); otherwise it is stranded.
  void abandon_send(MPI_Request& request, Outgoing& out, const Op& op) {
    if (MPI_Cancel(&request) == MPI_SUCCESS) {
      const auto grace = std::chrono::steady_clock::now() +
                         std::min<std::chrono::milliseconds>(options_.timeout, std::chrono::milliseconds(100));
      int flag = 0;
      const bool settled = poll(grace, [&] {
        const bool over = MPI_Test(&request, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag;
        return over ? detail::MpiWait::done : detail::MpiWait::busy;
      });
      if (settled) return;
    }
    strand(request, op);
    if (out.header) kept_headers_.push_back(std::move(out.header));
  }

  /// Leaves a request that cannot be completed or cancelled to MPI, and marks the endpoint unusable.
  void strand(MPI_Request& request, const Op& op) {
    stranded_.push_back(request);
    request = MPI_REQUEST_NULL;
    if (broken_.empty()) broken_ = describe(op) + " timed out with a transfer in flight";
  }
  /// A matched receive that timed out: MPI may still write into its scratch buffer and frame, so
  /// the endpoint keeps them (the caller's buffer is the caller's: see the class comment).
  void strand(Incoming& in, const Op& op) {
    strand(in.request, op);
    kept_buffers_.push_back(std::move(in.scratch));
    if (in.header) kept_headers_.push_back(std::move(in.header));
  }

  /// MPI_Iallreduce polled to completion would bound the wait, but measured 1.4 to 6 times slower
  /// than the blocking MPI_Allreduce from 4 KiB to 64 MiB on Open MPI 4.1 (its non-blocking
  /// collectives, libnbc, use simpler algorithms than the blocking ones, coll/tuned), however it was
  /// polled (bench/allreduce/mpi_allreduce_bench.cpp). So the blocking call runs, bounded one of
  /// two ways:
  ///  - abort_on_failure (the default, and what Mpi::run does with any failure): a watchdog thread
  ///    ends this process when the call outlasts the timeout, after printing which rank and call;
  ///    mpirun then stops the job. Nothing is added to the call's path but a clock read.
  ///  - otherwise, so that the timeout can be a TransportError this rank survives: an MPI_Ibarrier
  ///    polled against the deadline bounds the wait for every rank to arrive, then MPI_Allreduce
  ///    runs. That costs a barrier's latency per call (docs/benchmarks.md, "flotilla's MPI
  ///    transport against bare MPI_Allreduce": noticeable at a few KiB, lost in the transfer from
  ///    256 KiB up), and leaves unbounded a rank that stops mid-reduction while staying alive (one
  ///    that dies ends the job: mpirun kills every process of a job in which one exits abnormally).
  template <class T>
  void allreduce(std::span<T> values) {
    bounded({"allreduce_sum", any_peer, 0}, values.size(), user_comm_, [&](const Op& op) { reduce(values, op); });
    if (values.empty()) return;
    const std::uint64_t bytes = values.size() * sizeof(T), n = size_;
    counters_.payload_bytes_sent += 2 * (n - 1) * bytes / n;
    counters_.payload_bytes_received += 2 * (n - 1) * bytes / n;
    counters_.messages_sent += 2 * (n - 1);
    counters_.messages_received += 2 * (n - 1);
  }

  /// Runs `call(op)`, a blocking collective over `comm` on `count` values, bounded as allreduce
  /// says above (a watchdog, or an MPI_Ibarrier over `comm` polled against the deadline first).
  template <class Call>
  void bounded(const Op& op, std::size_t count, MPI_Comm comm, Call&& call) {
    check_usable(op);
    if (count == 0) return;  // every rank passes the same count, so every rank skips alike
    int ranks = 1;
    MPI_Comm_size(comm, &ranks);
    if (options_.abort_on_failure && ranks > 1) {
      if (!watchdog_)
        watchdog_ = std::make_unique<detail::MpiWatchdog>(
            options_.timeout,
            [this](std::uint64_t values) {
              WatchdogTimeout t;
              t.operation = watched_;
              t.rank = rank_;
              t.ranks = size_;
              t.values = values;
              t.timeout = options_.timeout;
              t.message = "failed: " + watched_ + " of " + std::to_string(values) + " values timed out after " +
                          timeout_text() + " (some rank did not take part, or stopped in it: " + every_rank() +
                          "); ending this process so that mpirun stops the job";
              return t;
            },
            options_.on_timeout);
      watched_ = op.name;
      watchdog_->arm(count);
      struct Disarm {
        detail::MpiWatchdog& w;
        ~Disarm() { w.disarm(); }
      } disarm{*watchdog_};
      call(op);
    } else {
      MPI_Request arrived = MPI_REQUEST_NULL;
      check(MPI_Ibarrier(comm, &arrived), "MPI_Ibarrier", op);
      // Busy, never idle: the barrier's rounds advance only while this rank polls.
      if (!poll(deadline(), [&] { return test(arrived, op) ? detail::MpiWait::done : detail::MpiWait::busy; })) {
        strand(arrived, op);
        throw TransportError(who() + ": " + op.name + " of " + std::to_string(count) + " values timed out after " +
                             timeout_text() + " (some rank did not take part: " + every_rank() + ")");
      }
      call(op);
    }
  }

  /// What a step inside a host moved, as shared memory: MPI carries it there (its shared-memory
  /// transport, between the processes of a node). The leader of L ranks takes in or hands out
  /// (L-1) x `bytes`; each other rank `bytes`.
  void count_inside_host(std::uint64_t bytes, bool incoming) noexcept {
    const std::uint64_t moved = host_rank_ == 0 ? (ranks_on_host_ - 1) * bytes : bytes;
    (incoming ? counters_.shared_memory_bytes_received : counters_.shared_memory_bytes_sent) += moved;
  }

  /// The hosts' leaders (HostHierarchy): each rank's place on its host, gathered; empty for a job on
  /// one host, with one rank a host, or with Options::hierarchical off.
  void find_host_leaders() {
    const int mine = host_rank_ == 0 ? static_cast<int>(rank_) : -1;
    std::vector<int> all(size_, -1);
    check(MPI_Allgather(&mine, 1, MPI_INT, all.data(), 1, MPI_INT, user_comm_), "MPI_Allgather of the hosts' leaders",
          "setup");
    std::vector<std::size_t> leaders;
    for (int r : all)
      if (r >= 0) leaders.push_back(static_cast<std::size_t>(r));
    if (options_.hierarchical && leaders.size() > 1 && leaders.size() < size_) host_leaders_ = std::move(leaders);
  }

  template <class T>
  void reduce(std::span<T> values, const Op& op) {
    // MPI counts are int: a longer vector is reduced in pieces.
    constexpr std::size_t piece = std::size_t{1} << 30;
    for (std::size_t at = 0; at < values.size(); at += piece) {
      const std::size_t n = std::min(piece, values.size() - at);
      check(MPI_Allreduce(MPI_IN_PLACE, values.data() + at, static_cast<int>(n), detail::mpi_datatype<T>(), MPI_SUM,
                          user_comm_),
            "MPI_Allreduce", op);
    }
  }

  Options options_;
  std::size_t rank_ = 0, size_ = 0, ranks_on_host_ = 1, host_rank_ = 0;
  MPI_Comm user_comm_ = MPI_COMM_NULL, reserved_comm_ = MPI_COMM_NULL, folded_comm_ = MPI_COMM_NULL;
  MPI_Comm host_comm_ = MPI_COMM_NULL;  // this host's ranks (MPI_COMM_TYPE_SHARED)
  std::vector<std::size_t> host_leaders_;
  std::string watched_ = "allreduce_sum";  // the bounded collective in progress, for the watchdog's message
  std::uint32_t tag_ub_ = 32767;
  std::vector<std::string> hosts_;  // by rank
  TrafficCounters counters_{};
  std::deque<Stashed> stash_;                         // folded messages set aside for a later receive
  std::string broken_;                                // why the endpoint is unusable; empty while it is usable
  std::vector<MPI_Request> stranded_;                 // requests MPI may still be working on
  std::vector<std::vector<std::byte>> kept_buffers_;  // their scratch buffers
  std::vector<std::unique_ptr<Tag>> kept_headers_;    // and folded frames' tags
  std::unique_ptr<detail::MpiWatchdog> watchdog_;     // last: its thread reads the members above
};

}  // namespace flotilla::transport::mpi
#endif  // FLOTILLA_TRANSPORT_MPI_ENDPOINT_HPP_INCLUDED
