// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Parameter server 0 re-admitting a lost worker that restarted (topology/detail/parameter_server.hpp),
// driven by a scripted endpoint: the messages a server receives, and the loss of a worker, in a
// chosen order; what it sends is recorded. Checks the clean round boundary: a rejoiner is
// admitted at once when every live worker is mid-epoch and no reduction round is open, is held
// while a round is open or a worker sits at an epoch boundary, is told the position and the next
// round when admitted, has its later pushes counted, and is told it is too late when the others
// finish first. (The whole path over TCP: distributed.tcp.ps_trainer_worker_rejoins.*.)
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "flotilla/codec/fp32.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/optim/sgd.hpp"
#include "flotilla/topology/detail/parameter_server.hpp"

namespace unit_ps_rejoin {

using namespace flotilla;
using detail::PsHeader;

namespace {

using Shard = detail::ParameterServerShard<float, optim::SGD, codec::Fp32>;
constexpr std::size_t parameters = 8;

/// One thing the server receives: a message from worker `from`, or the loss of that worker.
struct Event {
  std::size_t from = 0;
  PsHeader header{};
  bool lost = false;
  bool silently = false;  // lost while another's message was read: recorded, no error
};
Event push(std::size_t w) { return {w, PsHeader{PsHeader::push, 0, 0, 0, 0}}; }
Event done(std::size_t w) { return {w, PsHeader{PsHeader::done, 0, 0, 0, 0}}; }
Event lost(std::size_t w) { return {w, {}, true}; }
Event lost_silently(std::size_t w) { return {w, {}, true, true}; }
Event rejoin(std::size_t w, std::uint64_t steps_per_epoch) {
  return {w, PsHeader{PsHeader::hello, PsHeader::rejoining, steps_per_epoch, 0, 0}};
}
Event barrier(std::size_t w, std::uint64_t round) { return {w, PsHeader{PsHeader::reduce, 0, round, 0, 0}}; }

struct Sent {
  std::size_t to;
  Tag tag;
  PsHeader header;
};

/// A Transport whose recv_any plays `script`, and which records every send.
class ScriptedEndpoint {
 public:
  ScriptedEndpoint(std::size_t rank, std::size_t size, std::vector<Event> script)
      : rank_(rank), size_(size), script_(std::move(script)) {}
  std::size_t rank() const { return rank_; }
  std::size_t size() const { return size_; }
  TrafficCounters counters() const { return {}; }
  void continue_without_lost_peers(bool) noexcept {}
  void send(std::size_t peer, Tag tag, std::span<const std::byte> bytes) {
    sent.push_back({peer, tag, PsHeader::read(bytes.data())});
  }
  void recv(std::size_t, Tag, std::span<std::byte>) { throw std::logic_error("the script has no recv"); }
  void sendrecv(std::size_t, Tag, std::span<const std::byte>, std::size_t, std::span<std::byte>) {
    throw std::logic_error("the script has no sendrecv");
  }
  void barrier() {}
  std::size_t recv_any(Tag, std::span<std::byte> in) {
    if (next_ == script_.size()) throw std::logic_error("the script ended before the server did");
    Event ev = script_[next_++];
    while (ev.silently) {  // the transport marks it lost and goes on reading the next message
      silently_lost_.push_back(ev.from);
      if (next_ == script_.size()) throw std::logic_error("the script ended before the server did");
      ev = script_[next_++];
    }
    if (ev.lost) throw PeerLostError("worker " + std::to_string(ev.from) + " lost (scripted)", ev.from);
    std::fill(in.begin(), in.end(), std::byte{0});  // a zero gradient after the header
    ev.header.write(in.data());
    return ev.from;
  }

  bool peer_lost(std::size_t peer) const {
    return std::find(silently_lost_.begin(), silently_lost_.end(), peer) != silently_lost_.end();
  }

  std::vector<Sent> sent;

 private:
  std::vector<std::size_t> silently_lost_;
  std::size_t rank_, size_;
  std::vector<Event> script_;
  std::size_t next_ = 0;
};

/// Serves the script as server 0 of `workers` workers (asynchronous: no staleness bound unless given).
Shard serve(ScriptedEndpoint& e, std::size_t workers, std::size_t bound = std::numeric_limits<std::size_t>::max()) {
  TensorInfo t;
  t.size = parameters;
  const std::vector<float> initial(parameters, 1.0f);
  Shard shard({0, parameters}, initial, {t});
  optim::SGD sgd;
  shard.serve(e, workers, false, bound, sgd, [](std::uint64_t) { return 1.0; });
  return shard;
}

/// The full replies to worker w, in order, with their positions among all that was sent.
std::vector<std::pair<std::size_t, PsHeader>> full_replies_to(const ScriptedEndpoint& e, std::size_t w) {
  std::vector<std::pair<std::size_t, PsHeader>> out;
  for (std::size_t i = 0; i < e.sent.size(); ++i)
    if (e.sent[i].to == w && e.sent[i].tag == detail::protocol_tags::ps_full_reply) out.emplace_back(i, e.sent[i].header);
  return out;
}

}  // namespace

TEST_CASE("ps rejoin: admitted at once when every live worker is mid-epoch and no round is open") {
  std::vector<Event> s;
  for (int i = 0; i < 5; ++i) s.push_back(push(0));  // worker 0: 5 pushes (epoch of 4: mid-epoch)
  for (int i = 0; i < 6; ++i) s.push_back(push(2));  // worker 2: 6
  s.push_back(push(1));
  s.push_back(lost(1));
  s.push_back(rejoin(1, 4));
  s.push_back(push(1));
  s.push_back(push(1));
  for (std::size_t w : {0, 1, 2}) s.push_back(done(w));
  ScriptedEndpoint e(3, 4, s);
  const Shard shard = serve(e, 3);
  const auto replies = full_replies_to(e, 1);
  REQUIRE(replies.size() == 2);  // the rejoin, then done
  CHECK(replies[0].second.flags == 0);
  CHECK(replies[0].second.steps_ahead == 6);  // the furthest live worker's position
  CHECK(replies[0].second.staleness == 0);    // the next reduction round
  CHECK(shard.rejoins() == 1);
  CHECK(shard.pushes_after_rejoins() == 2);
  CHECK(shard.dropped_workers().size() == 1);
}

TEST_CASE("ps rejoin under a staleness bound: the rejoiner's clock is its position, so it waits for the slowest") {
  // A rejoiner whose clock started at the slowest worker's, behind its real position, would hold
  // the others back while it waited for them in the epoch's reduction, and the job would hang.
  std::vector<Event> s{lost(1)};
  for (int i = 0; i < 5; ++i) {  // workers 0 and 2 in step, 5 pushes each, then worker 2 one more
    s.push_back(push(0));
    s.push_back(push(2));
  }
  s.push_back(push(2));
  s.push_back(rejoin(1, 4));  // admitted at worker 2's position, 6
  s.push_back(push(1));       // 7: two ahead of worker 0, beyond the bound of 1
  s.push_back(push(0));       // 6: worker 1 is one ahead now, and released
  for (std::size_t w : {0, 1, 2}) s.push_back(done(w));
  ScriptedEndpoint e(3, 4, s);
  serve(e, 3, 1);
  const auto admitted = full_replies_to(e, 1);
  REQUIRE(!admitted.empty());
  CHECK(admitted[0].second.steps_ahead == 6);
  std::vector<Sent> after;  // the push replies after the admission, in order
  for (std::size_t i = admitted[0].first + 1; i < e.sent.size(); ++i)
    if (e.sent[i].tag == detail::protocol_tags::ps_reply) after.push_back(e.sent[i]);
  REQUIRE(after.size() == 2);
  CHECK(after[0].to == 0);  // worker 0's push answered first: worker 1 was held
  CHECK(after[1].to == 1);
  CHECK(after[1].header.steps_ahead == 1);  // released one step ahead of the slowest
}

TEST_CASE("ps server: a worker lost without an error (while another's message was read) is dropped, not waited for") {
  // Regression: the TCP endpoint records such a loss silently; the server never dropped the worker
  // and waited for it in the next reduction for ever (distributed.tcp.ps_trainer_worker_rejoins.async).
  std::vector<Event> s{push(0), push(1), push(2)};
  s.push_back(lost_silently(2));
  s.push_back(barrier(0, 0));
  s.push_back(barrier(1, 0));  // the round completes without worker 2
  for (std::size_t w : {0, 1}) s.push_back(done(w));
  ScriptedEndpoint e(3, 4, s);
  const Shard shard = serve(e, 3);
  REQUIRE(shard.dropped_workers().size() == 1);
  CHECK(shard.dropped_workers()[0].find("worker 2") != std::string::npos);
  std::size_t answers = 0;
  for (const auto& m : e.sent) answers += m.tag == detail::protocol_tags::ps_reduce_reply ? 1 : 0;
  CHECK(answers == 2);  // round 0 answered to workers 0 and 1
}

TEST_CASE("ps rejoin: held while a round is open or a worker is at an epoch boundary, then told the next round") {
  std::vector<Event> s;
  for (int i = 0; i < 4; ++i) s.push_back(push(0));  // both at the end of epoch 1 (4 steps)
  for (int i = 0; i < 4; ++i) s.push_back(push(2));
  s.push_back(push(1));
  s.push_back(lost(1));
  s.push_back(rejoin(1, 4));  // held: 0 and 2 are at an epoch boundary
  s.push_back(barrier(0, 0));  // round 0 opens
  s.push_back(push(0));        // 0 is mid-epoch, but the round is open and 2 at the boundary
  s.push_back(barrier(2, 0));  // round 0 answered (to 0 and 2, not to the rejoiner)
  s.push_back(push(2));        // now both mid-epoch, no round open: admitted
  s.push_back(push(1));
  for (std::size_t w : {0, 1, 2}) s.push_back(done(w));
  ScriptedEndpoint e(3, 4, s);
  const Shard shard = serve(e, 3);
  const auto replies = full_replies_to(e, 1);
  REQUIRE(replies.size() == 2);
  CHECK(replies[0].second.steps_ahead == 5);
  CHECK(replies[0].second.staleness == 1);  // it takes part from round 1 on
  // The round was answered before the rejoiner was let in, and not to it.
  std::size_t answered = 0, last_answer = 0;
  for (std::size_t i = 0; i < e.sent.size(); ++i) {
    if (e.sent[i].tag != detail::protocol_tags::ps_reduce_reply) continue;
    CHECK(e.sent[i].to != 1);
    ++answered;
    last_answer = i;
  }
  CHECK(answered == 2);
  CHECK(last_answer < replies[0].first);
  CHECK(shard.pushes_after_rejoins() == 1);
}

TEST_CASE("ps rejoin: a rejoiner still held when the others finish is told it is too late") {
  std::vector<Event> s;
  for (int i = 0; i < 4; ++i) s.push_back(push(0));
  s.push_back(push(1));
  s.push_back(lost(1));
  s.push_back(rejoin(1, 4));  // held: worker 0 is at an epoch boundary
  s.push_back(done(0));       // ... and finishes
  ScriptedEndpoint e(2, 3, s);
  const Shard shard = serve(e, 2);
  const auto replies = full_replies_to(e, 1);
  REQUIRE(replies.size() == 1);
  CHECK((replies[0].second.flags & PsHeader::too_late) != 0);
  CHECK(shard.rejoins() == 0);
}

TEST_CASE("ps rejoin: a synchronous server refuses a rejoining worker, naming it") {
  std::vector<Event> s = {push(0), lost(1), rejoin(1, 4)};
  ScriptedEndpoint e(2, 3, s);
  TensorInfo t;
  t.size = parameters;
  const std::vector<float> initial(parameters, 1.0f);
  Shard shard({0, parameters}, initial, {t});
  shard.continue_without_lost_workers(true);
  optim::SGD sgd;
  CHECK_THROWS_WITH_AS(shard.serve(e, 2, true, 0, sgd, [](std::uint64_t) { return 1.0; }),
                       doctest::Contains("worker 1 rejoins, which only asynchronous serving"), TransportError);
}

}  // namespace unit_ps_rejoin
