// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_SPARSE_ROWSERVER_HPP_INCLUDED
#define FLOTILLA_SPARSE_ROWSERVER_HPP_INCLUDED
// A parameter server of embedding rows: shard s of S of every table, served to W workers.
//
// Workers are ranks [0, W), servers ranks [first_server, first_server + S); the key k of a table
// lives on server owner_of(k, S). The messages are in sparse/detail/row_protocol.hpp. Per table:
//  - synchronous (aggregate): the pushes of one step, one from every worker still training, are
//    summed per key in worker order (so the sum does not depend on which push arrived first: the
//    result is bitwise reproducible), and every touched row gets one optimizer step with its sum.
//    A worker's pull waits until every push it has made to the table is applied: a pull for step
//    k + 1 is answered with the rows after step k.
//  - asynchronous: each push is applied as it arrives (its rows one optimizer step each); a pull
//    is answered at once, or, under a staleness bound s, once the worker's pushes to the table
//    are at most s ahead of the slowest worker still training.
// A worker's requests are answered in the order it made them, so its replies cannot overtake one
// another. A checkpoint request is answered once every push the requester made is applied, on
// every table: in synchronous training the shards saved are those of the step it named.
//
// A lost worker (PeerLostError): an asynchronous server goes on without it (over transports that
// can), a synchronous one stops with the transport's error unless told to go on, in which case
// steps are summed over the workers left. Every wait ends: the transport times out.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "flotilla/codec/fp32.hpp"
#include "flotilla/concepts/codec.hpp"
#include "flotilla/concepts/row_optimizer.hpp"
#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/log.hpp"
#include "flotilla/core/detail/key_map.hpp"
#include "flotilla/sparse/detail/row_protocol.hpp"
#include "flotilla/sparse/row_table.hpp"

namespace flotilla::sparse {

struct RowServerOptions {
  /// The most keys one request may carry; a peer announcing more is refused (TransportError).
  std::size_t max_keys_per_message = std::size_t{1} << 22;
  /// The most values (keys * dim) one push may carry.
  std::size_t max_values_per_message = std::size_t{1} << 28;
  /// Whether serving goes on without a lost worker (over transports that can). Unset: asynchronous
  /// serving goes on, synchronous serving stops.
  std::optional<bool> continue_without_lost_workers;
};

/// What a server has done so far (over every serve() call).
struct RowServerCounters {
  std::uint64_t pulls = 0, pushes = 0;            ///< requests answered / pushes received
  std::uint64_t keys_pulled = 0, keys_pushed = 0;  ///< keys in them
  std::uint64_t steps_applied = 0;                ///< optimizer steps over all tables
  std::uint64_t checkpoints = 0;                  ///< shards saved on request
};

/// The file of table t's shard s of S inside `directory`.
inline std::string row_shard_path(const std::string& directory, std::size_t table, std::size_t shard, std::size_t shards) {
  return (std::filesystem::path(directory) / ("rows-table" + std::to_string(table) + "-shard" + std::to_string(shard) +
                                              "-of" + std::to_string(shards) + ".bin"))
      .string();
}

namespace detail {
/// Whether `keys` ascend strictly (so are distinct).
inline bool strictly_ascending(const std::vector<std::uint64_t>& keys) noexcept {
  for (std::size_t i = 1; i < keys.size(); ++i)
    if (keys[i] <= keys[i - 1]) return false;
  return true;
}
}  // namespace detail

template <class WireCodec = codec::Fp32>
  requires Codec<WireCodec, float>
class RowServer {
 public:
  RowServer(std::size_t shard, std::size_t shards, RowServerOptions options = {})
      : shard_(shard), shards_(shards), options_(options) {
    if (shards_ == 0 || shard_ >= shards_)
      throw ConfigError("row server: shard " + std::to_string(shard_) + " of " + std::to_string(shards_) +
                        " does not exist");
  }

  /// Adds a table (its index is the number of tables added before it) and returns its index.
  template <RowOptimizer O>
  std::size_t add_table(TableSpec spec, O optimizer) {
    tables_.push_back(std::make_unique<RowShard<O>>(std::move(spec), std::move(optimizer), shard_, shards_));
    return tables_.size() - 1;
  }

  std::size_t shard() const noexcept { return shard_; }
  std::size_t shards() const noexcept { return shards_; }
  std::size_t tables() const noexcept { return tables_.size(); }
  detail::RowTableBase& table(std::size_t t) { return *tables_.at(t); }
  const detail::RowTableBase& table(std::size_t t) const { return *tables_.at(t); }
  std::size_t rows(std::size_t t) const { return tables_.at(t)->rows(); }
  std::size_t bytes(std::size_t t) const { return tables_.at(t)->bytes(); }
  const RowServerCounters& counters() const noexcept { return counters_; }
  /// Why each worker dropped by serve() was dropped, in order.
  const std::vector<std::string>& dropped_workers() const noexcept { return dropped_; }

  /// Saves every table's shard to row_shard_path(directory, t, shard, shards).
  void save(const std::string& directory, std::uint64_t step) const {
    std::error_code ec;
    std::filesystem::create_directories(directory, ec);
    if (ec)
      throw CheckpointError("row server shard " + std::to_string(shard_) + ": cannot create " + directory +
                                " for the checkpoint of step " + std::to_string(step) + ": " + ec.message(),
                            ec);
    for (std::size_t t = 0; t < tables_.size(); ++t) tables_[t]->save(row_shard_path(directory, t, shard_, shards_));
  }
  /// Loads every table's shard from the files save() wrote.
  void restore(const std::string& directory) {
    for (std::size_t t = 0; t < tables_.size(); ++t) tables_[t]->load(row_shard_path(directory, t, shard_, shards_));
  }

  /// Serves workers 0..workers-1 until each has said it is done (or was lost and dropped).
  template <Transport E>
  void serve(E& e, std::size_t workers, bool aggregate, std::size_t staleness_bound) {
    using detail::RowHeader;
    namespace tags = detail::row_tags;
    const std::size_t T = tables_.size();
    const std::string me = "row server " + std::to_string(shard_) + " of " + std::to_string(shards_) + " (rank " +
                           std::to_string(e.rank()) + ")";

    struct Push {
      std::vector<std::uint64_t> keys;
      std::vector<float> gradients;
    };
    struct Request {
      std::uint32_t kind = 0, table = 0, flags = 0;
      std::uint64_t step = 0;
      std::vector<std::uint64_t> keys;
      std::string directory;
    };
    // Buffers of requests and pushes answered or applied, reused for the next ones: a step's
    // pushes are hundreds of KiB, and a fresh allocation of that size is fresh pages to fault in.
    constexpr std::size_t spare_buffers = 8;
    std::vector<Push> spare_pushes;
    std::vector<std::vector<std::uint64_t>> spare_key_lists;
    auto take_spare = [](auto& pool) {
      typename std::remove_reference_t<decltype(pool)>::value_type x{};
      if (!pool.empty()) {
        x = std::move(pool.back());
        pool.pop_back();
      }
      return x;
    };
    auto keep_spare = [](auto& pool, auto&& x) {
      if (pool.size() < spare_buffers) pool.push_back(std::move(x));
    };
    std::vector<std::vector<std::deque<Push>>> queued(T, std::vector<std::deque<Push>>(aggregate ? workers : 0));
    std::vector<std::vector<std::uint64_t>> received(T, std::vector<std::uint64_t>(workers, 0));
    std::vector<std::vector<std::uint64_t>> applied(T, std::vector<std::uint64_t>(workers, 0));
    std::vector<std::deque<Request>> waiting(workers);
    std::vector<char> done(workers, 0);
    std::size_t done_count = 0;

    std::array<std::byte, RowHeader::size> hbuf{};
    std::vector<std::byte> payload, reply;
    std::vector<float> values;
    // The step's sum per key, in the order keys first appear (worker order, then push order).
    flotilla::detail::KeyMap index;
    std::vector<std::uint64_t> sum_keys;
    std::vector<float> sums;

    bool tolerate = false;
    if constexpr (ContinuesWithoutLostPeers<E>) {
      tolerate = options_.continue_without_lost_workers.value_or(!aggregate);
      if (tolerate) e.continue_without_lost_peers(true);
    }
    auto drop = [&](const PeerLostError& err) {
      const std::size_t w = err.peer();
      if (!tolerate || w >= workers) throw err;
      if (done[w]) return;
      done[w] = 1;
      ++done_count;
      waiting[w].clear();
      dropped_.push_back(err.what());
      log_message(LogLevel::warning, me, "dropped worker " + std::to_string(w) + ", going on: " + err.what());
    };

    auto begin_sum = [&] {
      index.clear();
      sum_keys.clear();
      sums.clear();
    };
    auto add_to_sum = [&](std::size_t dim, const Push& p) {
      for (std::size_t i = 0; i < p.keys.size(); ++i) {
        const float* g = p.gradients.data() + i * dim;
        const auto [at, fresh] = index.insert(p.keys[i], static_cast<std::uint32_t>(sum_keys.size()));
        if (fresh) {
          sum_keys.push_back(p.keys[i]);
          sums.insert(sums.end(), g, g + dim);
        } else {
          float* s = sums.data() + std::size_t{at} * dim;
          for (std::size_t j = 0; j < dim; ++j) s[j] += g[j];
        }
      }
    };
    auto apply_sum = [&](std::size_t t) {
      tables_[t]->apply(std::span<const std::uint64_t>(sum_keys), std::span<const float>(sums));
      ++counters_.steps_applied;
    };

    // Synchronous: applies table t's steps whose pushes are all in.
    auto aggregate_ready = [&](std::size_t t) {
      for (;;) {
        bool any = false, complete = true;
        for (std::size_t v = 0; v < workers; ++v) {
          if (!queued[t][v].empty()) {
            any = true;
          } else if (!done[v]) {
            complete = false;
          }
        }
        if (!any || !complete) return;
        std::size_t pushes = 0, only = 0;
        for (std::size_t v = 0; v < workers; ++v)
          if (!queued[t][v].empty()) ++pushes, only = v;
        if (pushes == 1 && detail::strictly_ascending(queued[t][only].front().keys)) {
          // One push (one worker left, or only one), its keys distinct (a client's push is in key
          // order): its gradients are the step's sum already.
          Push& p = queued[t][only].front();
          tables_[t]->apply(std::span<const std::uint64_t>(p.keys), std::span<const float>(p.gradients));
          ++counters_.steps_applied;
          keep_spare(spare_pushes, std::move(p));
          queued[t][only].pop_front();
          ++applied[t][only];
          continue;
        }
        begin_sum();
        for (std::size_t v = 0; v < workers; ++v) {
          if (queued[t][v].empty()) continue;
          add_to_sum(tables_[t]->dim(), queued[t][v].front());
          keep_spare(spare_pushes, std::move(queued[t][v].front()));
          queued[t][v].pop_front();
          ++applied[t][v];
        }
        apply_sum(t);
      }
    };

    auto slowest = [&](std::size_t t) {
      std::uint64_t m = std::numeric_limits<std::uint64_t>::max();
      for (std::size_t v = 0; v < workers; ++v)
        if (!done[v]) m = std::min(m, received[t][v]);
      return m;
    };
    auto caught_up = [&](std::size_t w, std::size_t t) { return applied[t][w] == received[t][w]; };
    auto answerable = [&](std::size_t w, const Request& r) {
      if (r.kind == RowHeader::checkpoint) {
        for (std::size_t t = 0; t < T; ++t)
          if (!caught_up(w, t)) return false;
        return true;
      }
      if (!caught_up(w, r.table)) return false;
      if (aggregate) return true;
      const std::uint64_t clock = received[r.table][w], low = slowest(r.table);
      return low == std::numeric_limits<std::uint64_t>::max() || clock - std::min(clock, low) <= staleness_bound;
    };
    auto answer = [&](std::size_t w, const Request& r) {
      RowHeader h{RowHeader::reply, r.table, 0, 0, r.step, 0};
      if (r.kind == RowHeader::checkpoint) {
        bool saved = false;
        try {
          save(r.directory, r.step);
          saved = true;
          ++counters_.checkpoints;
        } catch (const Error& err) {
          log_message(LogLevel::warning, me,
                      "the checkpoint of step " + std::to_string(r.step) + " was not saved: " + err.what());
        }
        h.flags = saved ? RowHeader::saved : 0;
        h.write(hbuf.data());
        e.send(w, tags::reply, hbuf);
        return;
      }
      auto& table = *tables_[r.table];
      const std::size_t n = r.keys.size(), dim = table.dim();
      values.resize(n * dim);
      if (r.flags & RowHeader::lookup_only) {
        table.peek(std::span<const std::uint64_t>(r.keys), std::span<float>(values));
      } else {
        table.gather(std::span<const std::uint64_t>(r.keys), std::span<float>(values));
      }
      h.count = n;
      h.write(hbuf.data());
      e.send(w, tags::reply, hbuf);
      if (n > 0) {
        if constexpr (detail::rows_travel_as_floats<WireCodec>) {
          e.send(w, tags::reply_payload, std::as_bytes(std::span<const float>(values)));
        } else {
          reply.resize(detail::reply_payload_size<WireCodec>(n, dim));
          WireCodec::encode(std::span<const float>(values), std::span<std::byte>(reply));
          e.send(w, tags::reply_payload, reply);
        }
      }
      ++counters_.pulls;
      counters_.keys_pulled += n;
    };
    // Answers, worker by worker and in the order asked, every request that may be answered now.
    auto answer_waiting = [&] {
      for (bool again = true; again;) {
        again = false;
        for (std::size_t w = 0; w < workers; ++w) {
          while (!waiting[w].empty() && answerable(w, waiting[w].front())) {
            Request r = std::move(waiting[w].front());
            waiting[w].pop_front();
            try {
              answer(w, r);
              keep_spare(spare_key_lists, std::move(r.keys));
            } catch (const PeerLostError& err) {
              drop(err);
              again = true;  // the slowest may have changed
              break;
            }
          }
        }
      }
    };
    auto after_change = [&] {
      if (aggregate)
        for (std::size_t t = 0; t < T; ++t) aggregate_ready(t);
      answer_waiting();
    };

    auto bound_keys = [&](std::size_t w, const RowHeader& h, const char* what) {
      if (h.count > options_.max_keys_per_message)
        throw TransportError(me + ": worker " + std::to_string(w) + " announced a " + what + " of " +
                             std::to_string(h.count) + " keys for table " + std::to_string(h.table) +
                             ", more than the bound of " + std::to_string(options_.max_keys_per_message) +
                             " (RowServerOptions::max_keys_per_message)");
      const std::size_t dim = tables_[h.table]->dim();
      if (h.count * dim > options_.max_values_per_message)
        throw TransportError(me + ": worker " + std::to_string(w) + " announced a " + what + " of " +
                             std::to_string(h.count) + " rows of dim " + std::to_string(dim) + " for table " +
                             std::to_string(h.table) + ", more than the bound of " +
                             std::to_string(options_.max_values_per_message) +
                             " values (RowServerOptions::max_values_per_message)");
    };
    auto receive_payload = [&](std::size_t w, std::size_t size) {
      payload.resize(size);
      if (size > 0) e.recv(w, tags::request_payload, payload);
    };

    while (done_count < workers) {
      if constexpr (ReportsLostPeers<E>) {
        bool found = false;
        for (std::size_t v = 0; v < workers; ++v) {
          if (done[v] || !e.peer_lost(v)) continue;
          drop(PeerLostError(me + ": worker " + std::to_string(v) + "'s connection was lost", v));
          found = true;
        }
        if (found) {
          after_change();
          continue;
        }
      }
      std::size_t w = 0;
      RowHeader h;
      try {
        w = e.recv_any(tags::request, hbuf);
        if (w >= workers)
          throw TransportError(me + ": request from rank " + std::to_string(w) + ", which is not a worker (workers are ranks 0.." +
                               std::to_string(workers - 1) + ")");
        if (done[w]) throw TransportError(me + ": request from worker " + std::to_string(w) + " after it said it was done");
        h = RowHeader::read(hbuf.data());
        if ((h.kind == RowHeader::pull || h.kind == RowHeader::push) && h.table >= T)
          throw TransportError(me + ": worker " + std::to_string(w) + " names table " + std::to_string(h.table) +
                               ", but the server holds " + std::to_string(T) + " tables");
        switch (h.kind) {
          case RowHeader::pull: {
            bound_keys(w, h, "pull");
            receive_payload(w, detail::pull_payload_size<WireCodec>(h.count));
            Request r{h.kind, h.table, h.flags, h.step, take_spare(spare_key_lists), {}};
            r.keys.resize(h.count);
            detail::read_keys(payload.data(), r.keys.data(), r.keys.size());
            waiting[w].push_back(std::move(r));
            break;
          }
          case RowHeader::push: {
            bound_keys(w, h, "push");
            const std::size_t n = h.count, dim = tables_[h.table]->dim();
            receive_payload(w, detail::push_payload_size<WireCodec>(n, dim));
            Push p = take_spare(spare_pushes);
            p.keys.resize(n);
            p.gradients.resize(n * dim);
            detail::read_keys(payload.data(), p.keys.data(), n);
            WireCodec::decode(std::span<const std::byte>(payload).subspan(n * detail::key_bytes), std::span<float>(p.gradients));
            ++counters_.pushes;
            counters_.keys_pushed += n;
            ++received[h.table][w];
            if (aggregate) {
              queued[h.table][w].push_back(std::move(p));
            } else {
              begin_sum();
              add_to_sum(dim, p);
              apply_sum(h.table);
              keep_spare(spare_pushes, std::move(p));
              ++applied[h.table][w];
            }
            break;
          }
          case RowHeader::checkpoint: {
            if (h.count == 0 || h.count > detail::max_directory_bytes)
              throw TransportError(me + ": worker " + std::to_string(w) + " announced a checkpoint directory of " +
                                   std::to_string(h.count) + " bytes (1 to " +
                                   std::to_string(detail::max_directory_bytes) + " accepted)");
            receive_payload(w, h.count);
            Request r{h.kind, 0, 0, h.step, {}, std::string(reinterpret_cast<const char*>(payload.data()), payload.size())};
            waiting[w].push_back(std::move(r));
            break;
          }
          case RowHeader::done:
            done[w] = 1;
            ++done_count;
            break;
          default:
            throw TransportError(me + ": message of unknown kind " + std::to_string(h.kind) + " from worker " +
                                 std::to_string(w));
        }
      } catch (const PeerLostError& err) {
        drop(err);
      }
      after_change();
    }
    if (aggregate)
      for (std::size_t t = 0; t < T; ++t) aggregate_ready(t);  // the steps of workers that finished early
  }

 private:
  std::size_t shard_, shards_;
  RowServerOptions options_;
  std::vector<std::unique_ptr<detail::RowTableBase>> tables_;
  RowServerCounters counters_;
  std::vector<std::string> dropped_;
};

}  // namespace flotilla::sparse
#endif  // FLOTILLA_SPARSE_ROWSERVER_HPP_INCLUDED
