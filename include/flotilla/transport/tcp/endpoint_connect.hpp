// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_TCP_ENDPOINTCONNECT_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_TCP_ENDPOINTCONNECT_HPP_INCLUDED
// How an endpoint (endpoint.hpp) joins its job: connect() runs the rendezvous (rendezvous.hpp) and
// the ranks' agreement on the shared-memory allreduce (host_allreduce.hpp); serve_rejoins() lets a
// lost rank that restarted back in.
#include <poll.h>
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/core/log.hpp"
#include "flotilla/transport/tcp/endpoint.hpp"
#include "flotilla/transport/tcp/host_identity.hpp"
#include "flotilla/transport/tcp/rendezvous.hpp"
#include "flotilla/transport/tcp/shared_memory.hpp"
#include "flotilla/transport/tcp/wire.hpp"

namespace flotilla::transport::tcp {

inline Endpoint Endpoint::connect(const Options& options) {
  detail::tcp_validate(options);
  detail::TcpRendezvous rv(options);
  rv.run();
  Endpoint e(options, rv.reactor(), rv.links(), rv.addresses(), rv.counters(), rv.listener(), rv.job_id());
  for (auto& l : e.links_)
    if (l.open()) {
      detail::limit_unsent(l.socket, options.unsent_limit_bytes);
      l.checksum = e.checksums_on(l);
      e.set_frame_macs(l);
    }
  e.ranks_on_host_ = 1 + static_cast<std::size_t>(std::count_if(e.links_.begin(), e.links_.end(), [&e](const auto& l) {
                       return e.open_peer_link(l) && e.link_on_this_host(l);
                     }));
  if (options.world_size > 1 && options.rejoin.empty()) {
    // The setup's messages are part of the rendezvous: counted as framing, like the handshake.
    const TrafficCounters before = e.counters_;
    e.negotiate_shared_memory();
    const TrafficCounters setup = e.counters_ - before;
    e.counters_ = before;
    e.counters_.header_bytes_sent += setup.payload_bytes_sent + setup.header_bytes_sent;
    e.counters_.header_bytes_received += setup.payload_bytes_received + setup.header_bytes_received;
  }
  return e;
}

inline bool Endpoint::checksums_on(const detail::TcpLink& l) const {
  return options_.checksum_data == DataChecksums::all ||
         (options_.checksum_data == DataChecksums::other_hosts && !link_on_this_host(l));
}

inline void Endpoint::set_frame_macs(detail::TcpLink& l) const {
  l.mac_send.reset();
  l.mac_receive.reset();
  l.mac_required = false;
  if (!l.keys) return;
  l.mac_receive.emplace(l.keys->receive);
  if (options_.frame_mac == FrameMacs::all || (options_.frame_mac == FrameMacs::other_hosts && !link_on_this_host(l))) {
    l.mac_send.emplace(l.keys->send);
    l.mac_required = true;
  }
}

inline bool Endpoint::link_on_this_host(const detail::TcpLink& l) const {
  detail::ErrorCode e1, e2;
  const auto remote = l.socket.remote_endpoint(e1).address();
  const auto local = l.socket.local_endpoint(e2).address();
  return !e1 && !e2 && (remote.is_loopback() || remote == local);
}

// The job's agreement on the shared-memory path, over the authenticated connections (tag
// shared_memory_setup_tag), in every job of more than one rank, so that ranks that were given
// different settings find out here rather than hang in their first sum:
//   1. each rank tells rank 0 its setting and its host: "off|auto|on <bytes> <host identity>"
//      (host_identity.hpp);
//   2. rank 0 answers each with the plan: "skip", "fail <why>", or "try <bytes> <required> <hosts>",
//      hosts being every host's ranks ("0,1;2,3;4,5", in order of their lowest rank);
//   3. on each host of several ranks its leader (lowest rank) makes a segment under a fresh name
//      and sends the name to the others there ("fail <why>" when it could not); each maps it and
//      answers "" or why not; the leader removes the name (the segment lives on in the mappings
//      only, so nothing is left behind however the job ends) and tells rank 0 "" or the first
//      reason (every leader does, with one rank or several);
//   4. rank 0 sends every rank the verdict: "" or the first reason.
// A failed verdict ends the rendezvous when the path was required (TcpSharedMemory::on) and
// leaves the job on its sockets otherwise.
inline void Endpoint::negotiate_shared_memory() {
  using detail::SharedMemoryAllreduce;
  const Tag tag = detail::shared_memory_setup_tag;
  const std::string context = who() + ": cannot set up the shared-memory allreduce (TcpOptions::shared_memory, FLOTILLA_SHARED_MEMORY): ";
  // The plan lists every rank: its bound grows with the job (a rank number and a separator each).
  const std::size_t max_text = 512 + 21 * size_;
  auto receive_text = [&](std::size_t from) {
    std::size_t length = 0;
    recv(from, tag, std::as_writable_bytes(std::span<std::size_t>(&length, 1)));
    if (length > max_text)
      throw TransportError(who() + ": shared-memory setup: rank " + std::to_string(from) + " sent " +
                           std::to_string(length) + " bytes of text, more than " + std::to_string(max_text));
    std::string text(length, '\0');
    recv(from, tag, std::as_writable_bytes(std::span<char>(text.data(), length)));
    return text;
  };
  auto send_text = [&](std::size_t to, const std::string& t) {
    const std::size_t length = t.size();
    send(to, tag, std::as_bytes(std::span<const std::size_t>(&length, 1)));
    send(to, tag, std::as_bytes(std::span<const char>(t.data(), t.size())));
  };
  static constexpr const char* mode_names[] = {"off", "auto", "on"};
  const auto own_mode = static_cast<std::size_t>(options_.shared_memory);
  const std::string identity = options_.host.empty() ? detail::host_identity() : options_.host;

  // Step 3 on this rank's host: its part of the plan; `problem` gets why it failed, if it did.
  auto join_host = [&](const std::vector<std::vector<std::size_t>>& hosts, std::size_t capacity, std::string& problem) {
    std::vector<std::size_t> leaders, members;
    for (const auto& h : hosts) {
      leaders.push_back(h.front());
      if (std::find(h.begin(), h.end(), rank_) != h.end()) members = h;
    }
    std::optional<SharedMemoryAllreduce> segment;
    const auto local = static_cast<std::size_t>(std::find(members.begin(), members.end(), rank_) - members.begin());
    if (members.size() > 1 && local == 0) {
      const std::string name = SharedMemoryAllreduce::random_name();
      try {
        segment.emplace(SharedMemoryAllreduce::create(name, members.size(), capacity));
      } catch (const TransportError& x) {
        problem = "rank " + std::to_string(rank_) + ": " + x.what();
      }
      for (std::size_t i = 1; i < members.size(); ++i) send_text(members[i], segment ? name : "fail " + problem);
      for (std::size_t i = 1; i < members.size(); ++i) {
        const std::string answer = receive_text(members[i]);
        if (problem.empty() && !answer.empty()) problem = "rank " + std::to_string(members[i]) + ": " + answer;
      }
      if (segment) ::shm_unlink(name.c_str());  // mapped by every rank that could: the name must not outlive the job
    } else if (members.size() > 1) {
      const std::string name = receive_text(members.front());
      std::string answer;
      if (!name.starts_with("fail ")) {
        try {
          segment.emplace(SharedMemoryAllreduce::open(name, local, members.size(), capacity));
        } catch (const TransportError& x) {
          answer = x.what();
        }
      }
      send_text(members.front(), answer);
    }
    return std::make_unique<detail::HostAllreduce>(rank_, std::move(members), std::move(leaders), std::move(segment),
                                                   capacity);
  };
  auto install = [&](std::unique_ptr<detail::HostAllreduce> plan, std::size_t capacity, bool required,
                     const std::string& verdict) {
    if (verdict.empty()) {
      shared_memory_ = std::move(plan);
      options_.shared_memory_bytes = capacity;
      return;
    }
    if (required) throw TransportError(context + verdict);
    detail::tcp_log(options_, LogLevel::info, who(), who() + ": summing over the sockets: " + verdict);
  };

  if (rank_ != 0) {
    send_text(0, std::string(mode_names[own_mode]) + " " + std::to_string(options_.shared_memory_bytes) + " " + identity);
    const std::string plan = receive_text(0);
    if (plan == "skip") return;
    if (plan.starts_with("fail ")) throw TransportError(context + plan.substr(5));
    std::size_t capacity = 0;
    int required = 0, used = 0;
    std::vector<std::vector<std::size_t>> hosts;
    const bool parsed = std::sscanf(plan.c_str(), "try %zu %d %n", &capacity, &required, &used) == 2 && used > 0 &&
                        detail::shared_memory_piece_bytes_valid(capacity) &&
                        parse_hosts(std::string_view(plan).substr(static_cast<std::size_t>(used)), hosts);
    if (!parsed) throw TransportError(who() + ": shared-memory setup: rank 0 sent a malformed plan '" + plan + "'");
    std::string problem;
    auto mine = join_host(hosts, capacity, problem);
    if (mine->leader()) send_text(0, problem);
    install(std::move(mine), capacity, required != 0, receive_text(0));
    return;
  }

  // Rank 0: gather the settings and the hosts, decide, and collect each host's outcome.
  std::vector<std::size_t> modes(size_, own_mode), capacities(size_, options_.shared_memory_bytes);
  std::vector<std::string> identities(size_, identity);
  std::string problem;
  for (std::size_t p = 1; p < size_; ++p) {
    const std::string offer = receive_text(p);
    char mode[8] = {}, host[400] = {};
    int used = 0;
    std::size_t k = 3;  // no mode until one is recognised
    if (std::sscanf(offer.c_str(), "%7s %zu %399s%n", mode, &capacities[p], host, &used) == 3 &&
        static_cast<std::size_t>(used) == offer.size() && detail::shared_memory_piece_bytes_valid(capacities[p]))
      for (k = 0; k < 3 && std::strcmp(mode, mode_names[k]) != 0;) ++k;
    if (k < 3) {
      modes[p] = k;
      identities[p] = host;
    } else if (problem.empty()) {
      problem = "rank " + std::to_string(p) + " sent a malformed setting '" + offer + "'";
    }
  }
  const auto on = static_cast<std::size_t>(SharedMemory::on), off = static_cast<std::size_t>(SharedMemory::off);
  const auto first = [&](std::size_t mode) { return std::size_t(std::find(modes.begin(), modes.end(), mode) - modes.begin()); };
  const bool required = first(on) < size_, some_off = first(off) < size_;
  const std::size_t capacity = required ? capacities[first(on)] : capacities[0];
  if (problem.empty() && required && some_off)
    problem = "rank " + std::to_string(first(on)) + " requires it (on) and rank " + std::to_string(first(off)) +
              " has it off: give every rank the same FLOTILLA_SHARED_MEMORY";
  for (std::size_t r = 0; r < size_ && problem.empty() && required; ++r)
    if (modes[r] == on && capacities[r] != capacity)
      problem = "rank " + std::to_string(first(on)) + " sums pieces of " + std::to_string(capacity) + " bytes and rank " +
                std::to_string(r) + " of " + std::to_string(capacities[r]) + ": give every rank the same shared_memory_bytes";
  if (problem.empty() && required && !detail::shared_memory_allreduce_available) problem = "it needs Linux";
  // The hosts, in order of their lowest rank, each with its ranks ascending.
  std::vector<std::vector<std::size_t>> hosts;
  for (std::size_t r = 0; r < size_; ++r) {
    const auto same = std::find_if(hosts.begin(), hosts.end(), [&](const auto& h) { return identities[h.front()] == identities[r]; });
    if (same == hosts.end()) hosts.push_back({r});
    else same->push_back(r);
  }
  const bool shared_host = hosts.size() < size_;
  if (problem.empty() && required && !shared_host)
    problem = "no two of the job's " + std::to_string(size_) + " ranks are on one host, so there is nothing to share";
  const bool conflict = !problem.empty();  // the settings disagree: every rank fails, whatever the modes
  if (conflict || some_off || !detail::shared_memory_allreduce_available || !shared_host) {
    const bool fatal = conflict || (required && !problem.empty());
    for (std::size_t p = 1; p < size_; ++p) send_text(p, fatal ? "fail " + problem : std::string("skip"));
    if (fatal) throw TransportError(context + problem);
    return;
  }
  std::string listed;
  for (const auto& h : hosts) {
    listed += listed.empty() ? "" : ";";
    for (std::size_t i = 0; i < h.size(); ++i) {
      if (i) listed += ',';
      listed += std::to_string(h[i]);
    }
  }
  for (std::size_t p = 1; p < size_; ++p) send_text(p, "try " + std::to_string(capacity) + " " + (required ? "1 " : "0 ") + listed);
  auto mine = join_host(hosts, capacity, problem);
  for (std::size_t h = 1; h < hosts.size(); ++h) {
    const std::string outcome = receive_text(hosts[h].front());
    if (problem.empty() && !outcome.empty()) problem = outcome;
  }
  for (std::size_t p = 1; p < size_; ++p) send_text(p, problem);
  install(std::move(mine), capacity, required, problem);
}

inline bool Endpoint::parse_hosts(std::string_view text, std::vector<std::vector<std::size_t>>& hosts) const {
  std::vector<bool> seen(size_, false);
  hosts.assign(1, {});
  std::size_t value = 0;
  bool digits = false;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : ';';
    if (c >= '0' && c <= '9') {
      value = value * 10 + static_cast<std::size_t>(c - '0');
      if (value >= size_) return false;
      digits = true;
      continue;
    }
    if ((c != ',' && c != ';') || !digits || seen[value]) return false;
    auto& h = hosts.back();
    if (!h.empty() && value <= h.back()) return false;                                                // ascending on a host
    if (h.empty() && hosts.size() > 1 && value <= hosts[hosts.size() - 2].front()) return false;  // hosts by lowest rank
    h.push_back(value);
    seen[value] = true;
    value = 0;
    digits = false;
    if (c == ';' && i < text.size()) hosts.emplace_back();
  }
  return std::all_of(seen.begin(), seen.end(), [](bool b) { return b; });
}

inline std::optional<std::size_t> Endpoint::hung_up_peer() noexcept {
  for (auto& l : links_) {
    if (l.peer == rank_ || l.peer == detail::tcp_nobody) continue;
    if (l.lost || !l.open()) return l.peer;
    pollfd f{l.socket.native_handle(), POLLRDHUP, 0};
    if (::poll(&f, 1, 0) > 0 && (f.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) return l.peer;
  }
  return std::nullopt;
}

inline void Endpoint::check_alive_during_shared_memory(std::size_t peer, Clock::time_point since) {
  // A shared-memory sum waits on counters, not sockets, so nothing reads the heartbeats that
  // arrive meanwhile. Read every link once per half interval: a peer's `heard` then lags its last
  // heartbeat by at most that, and the stall is named within the socket path's bound. Reading
  // also takes in an abort frame from a rank that named a failure first (fail_link rethrows it,
  // with its culprit), and notices a connection that closed.
  const auto now = Clock::now();
  if (now >= next_heartbeat_read_) {
    next_heartbeat_read_ = now + options_.heartbeat_interval / 2;
    for (auto& l : links_)
      if (open_peer_link(l) && !l.eof) pump(l, false);
  }
  Link& l = links_[peer];
  if (l.lost || !l.open())
    throw PeerLostError(who() + ": " + describe_op() + " failed: " + peer_name(peer) +
                            " closed its connection during a shared-memory allreduce (its process ended)",
                        peer);
  const auto limit = options_.stall_limit();
  if (Clock::now() - std::max(l.heard, since) <= limit) return;
  pump(l, false);  // the last look: a heartbeat may have arrived since the read above
  if (Clock::now() - std::max(l.heard, since) <= limit) return;
  throw PeerLostError(who() + ": " + describe_op() + " failed: " + peer_name(peer) + " has sent nothing, not even a " +
                          "heartbeat, for " + std::to_string(limit.count()) + " ms (heartbeats every " +
                          std::to_string(options_.heartbeat_interval.count()) + " ms) and has not reached this " +
                          "shared-memory allreduce: it is stalled (stopped, hung, or its machine unreachable)",
                      peer);
}

inline void Endpoint::allreduce_sum(std::span<float> values) {
  if (shared_memory_ && shared_memory_->across_hosts())
    throw ConfigError(who() + ": allreduce_sum sums through one host's shared memory, and this job spans " +
                      std::to_string(shared_memory_->leaders().size()) +
                      " hosts: its sums are hierarchical (collective::ring_allreduce, HostHierarchy)");
  through_shared_memory("allreduce_sum", values.size(), false,
                        [&](detail::HostAllreduce& s, const auto& w) { s.allreduce_sum(values, w, counters_); });
}

inline void Endpoint::reduce_to_host_leader(std::span<float> values) {
  through_shared_memory("reduce_to_host_leader", values.size(), true,
                        [&](detail::HostAllreduce& s, const auto& w) { s.reduce_to_leader(values, w, counters_); });
}

inline void Endpoint::broadcast_from_host_leader(std::span<float> values) {
  through_shared_memory("broadcast_from_host_leader", values.size(), true,
                        [&](detail::HostAllreduce& s, const auto& w) { s.broadcast_from_leader(values, w, counters_); });
}

template <class Step>
void Endpoint::through_shared_memory(const char* name, std::size_t values, bool piece, Step&& step) {
  if (!shared_memory_)
    throw ConfigError(who() + ": " + name + " needs the shared-memory path, which is off (TcpOptions::shared_memory, "
                      "FLOTILLA_SHARED_MEMORY; it needs two ranks on one host) or was switched off by a lost peer");
  if (piece && !shared_memory_->across_hosts())
    throw ConfigError(who() + ": " + name + " is a step of the sums of a job over several hosts, and this one is on one "
                      "host: allreduce_sum sums its values");
  if (piece && values * sizeof(float) > shared_memory_->piece_bytes())
    throw ConfigError(who() + ": " + name + " takes at most host_piece_bytes() = " +
                      std::to_string(shared_memory_->piece_bytes()) + " bytes at once, not " +
                      std::to_string(values * sizeof(float)));
  begin(detail::TcpOp{name});
  detail::SharedMemoryAllreduce::Watch w{options_.timeout, [this] { return hung_up_peer(); }, [this] { return who(); },
                                          [this](std::size_t p) { return peer_name(p); },
                                          [this](std::size_t p, Clock::time_point since) {
                                            check_alive_during_shared_memory(p, since);
                                          }};
  // mark_lost() drops shared_memory_ (the ranks' calls no longer match once a peer is lost), and
  // the watch may call it: the segment is held here while it runs, and put back only when no
  // peer was lost during the call.
  const auto lost_links = [this] {
    return std::count_if(links_.begin(), links_.end(), [](const Link& l) { return l.lost; });
  };
  const auto lost_before = lost_links();
  auto segment = std::move(shared_memory_);
  try {
    step(*segment, w);
    if (lost_links() == lost_before) shared_memory_ = std::move(segment);
  } catch (const TransportError& x) {
    // The ranks' calls are out of step now: later sums go through the sockets (the ring).
    segment.reset();
    const auto* lost = dynamic_cast<const PeerLostError*>(&x);
    if (lost && lost->peer() < links_.size()) {
      Link& l = links_[lost->peer()];
      // A peer that failed because another did sent the first failure's reason (an abort frame)
      // before it closed: read it, and fail with it, as a socket operation would have.
      if (!survive_lost_peers_ && l.open()) {
        try {
          pump(l, false);
        } catch (const PeerLostError&) {  // it closed without one: the report below stands
        }
      }
      // Lost as if a socket operation had found it, so that this loss is reported once, here,
      // and not again when the reactor reads the closed connection during a later operation.
      mark_lost(l);
    }
    if (lost && survive_lost_peers_) throw;
    // An abort frame read during the wait has set the cause already, with the rank that failed
    // first: keep it.
    if (broken_.empty()) {
      broken_ = x.what();
      culprit_ = lost ? lost->peer() : rank_;
    }
    throw;
  }
}

inline void Endpoint::serve_rejoins(bool listener_ready) {
  if (!rejoin_handshakes_) rejoin_handshakes_ = std::make_unique<detail::TcpRendezvous>(options_, reactor_, job_id_);
  detail::TcpRendezvous& rv = *rejoin_handshakes_;
  try {
    rv.serve_handshakes(rejoin_listener_->listener, listener_ready, "accepting",
                        [&rv] { return rv.hello_payload(0, {}); });
  } catch (const TransportError& e) {  // accepting failed (out of descriptors): the next connection may do
    detail::tcp_log(options_, LogLevel::warning, who(), std::string(e.what()) + "; going on");
  }
  while (!rv.arrived_.empty()) {
    auto a = std::move(rv.arrived_.front());
    rv.arrived_.pop_front();
    admit_rejoiner(rv, std::move(a));
  }
}

inline void Endpoint::admit_rejoiner(detail::TcpRendezvous& rv, detail::TcpRendezvous::Arrival a) {
  const std::size_t p = a.hello.rank;
  std::string refusal = rv.check_world_size(a.hello, a.peer);
  if (!refusal.empty()) {
  } else if (p >= size_ || p == rank_) {
    refusal = a.peer + " claims rank " + std::to_string(p) + ", which cannot rejoin " + who();
  } else if (links_[p].goodbye && !links_[p].lost) {
    refusal = "rank " + std::to_string(p) + " has finished (it said goodbye to " + who() + "): " + a.peer +
              " cannot rejoin as rank " + std::to_string(p);
  } else if (!links_[p].lost) {
    refusal = "rank " + std::to_string(p) + " is still alive (its connection to " + who() + " is open): " + a.peer +
              " cannot rejoin as rank " + std::to_string(p) + " (two processes given the same FLOTILLA_RANK?)";
  }
  // The answer is a small frame on a fresh connection: the socket takes it at once, and a peer
  // that does not read it costs at most the handshake limit.
  rv.restart_deadline();
  if (!refusal.empty()) {
    rv.tell_refused(a.link, refusal);
    detail::tcp_log(options_, LogLevel::warning, who(), who() + ": refused " + a.peer + ": " + refusal);
    return;
  }
  try {
    wire::Table welcome;
    welcome.job_id = job_id_;
    rv.send_frame(a.link, wire::FrameType::table, wire::encode_table(welcome), a.peer);
  } catch (const TransportError& e) {
    detail::tcp_log(options_, LogLevel::warning, who(),
                    std::string(e.what()) + "; going on without rank " + std::to_string(p));
    return;
  }
  // The lost link's waits ended when it was closed; its guard is the heartbeat thread's.
  Link& l = links_[p];
  l.socket = std::move(a.link.socket);
  detail::limit_unsent(l.socket, options_.unsent_limit_bytes);
  l.checksum = checksums_on(l);
  l.keys = a.link.keys;
  set_frame_macs(l);
  l.send_sequence = a.link.send_sequence;
  l.recv_sequence = a.link.recv_sequence;
  l.read_armed = l.write_armed = l.read_fired = false;
  l.wait_error = {};
  l.parked = l.send_broken = l.lost = l.in_frame = l.large = l.goodbye = l.eof = false;
  l.begin = l.end = 0;
  l.frame = {};
  l.frame_done = 0;
  l.mac_done = 0;
  l.sink = Link::Sink::staging;
  l.user = nullptr;
  l.staging.reset();
  l.queue.clear();
  l.tokens.clear();
  l.heard = Clock::now();
  shared_memory_.reset();  // the rejoined rank has no segment: from here on the job sums over the sockets
  addresses_[p] = detail::format_host_port(detail::remote_host_port(l.socket));
  l.address = addresses_[p];
  {
    std::lock_guard lock(l.guard->m);
    l.guard->fd = l.socket.native_handle();
    l.guard->beating = true;
    l.guard->mid_frame = false;
    l.guard->beat_done = wire::header_size;
  }
  detail::tcp_log(options_, LogLevel::info, who(),
                  who() + ": rank " + std::to_string(p) + " rejoined from " + addresses_[p]);
}

}  // namespace flotilla::transport::tcp
#endif  // FLOTILLA_TRANSPORT_TCP_ENDPOINTCONNECT_HPP_INCLUDED
