// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TOPOLOGY_COSTMODEL_HPP_INCLUDED
#define FLOTILLA_TOPOLOGY_COSTMODEL_HPP_INCLUDED
// flotilla::cost: what one synchronous step's gradient exchange costs, as an alpha-beta model.
//
// An exchange is priced by three counts (Terms): the messages on its critical path, the bytes
// that cross its busiest link one after the other (a link's two directions count once where they
// carry at the same time), and the bytes of memory work on its busiest rank (adding, encoding,
// copying through shared memory). Three prices (Prices) turn them into seconds: alpha per message,
// beta per link byte (one over the link's rate), gamma per byte of memory work. fit() finds the
// prices that best explain measured steps; seconds() predicts others, such as a thousand workers
// nobody has.
//
// The exchanges, for V values of w wire bytes each (4 for fp32, 2 for fp16) in B buckets:
//
//   ring over N workers         messages 2(N-1) B    link 2(N-1)/N V w              memory 2(N-1)/N 4V
//   hierarchical, H hosts of L  messages 2H B        link 2(H-1)/H V w              memory (2(L-1)/L + 2(H-1)/H) 4V
//   N workers, S servers        messages 2N          link (max(N/S, 1) + 1) V w     memory (N/S + 1) 4V
//
// The ring's reduce-scatter and allgather each send and receive 1/N of the buffer per step at
// once; with several ranks per host in ring order, one ring edge leaves each host, so a host's link
// carries one rank's bytes. The hierarchical sum moves 2(H-1)/H of the buffer between the hosts'
// leaders, and sums and spreads inside each host through shared memory (a step each). A server
// receives one push of its shard (V/S) from every worker, and only when it has all of them answers
// the workers, one after the other: N V/S out of its link. A worker answered early pushes its next
// step meanwhile, so in a steady run the pushes hide behind the replies, all but the last worker's,
// which follows them through its own link: N V/S + V of link time a step (2V where the workers'
// links are the narrower, with more servers than workers). That needs the replies to leave one
// after the other, as the TCP transport sends them (TcpOptions::unsent_limit_bytes); were the
// socket buffers to take them whole, they would leave side by side, end together, and the pushes
// would arrive together: up to 2N V/S (docs/cost_model.md, measured).
//
// docs/cost_model.md checks the model against measured steps and predicts larger jobs.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <string>

#include "flotilla/core/error.hpp"

namespace flotilla::cost {

/// What an exchange costs, in the units the model prices.
struct Terms {
  double messages = 0;     ///< messages one after the other on the critical path
  double link_bytes = 0;   ///< bytes through the busiest link (see the top of this file)
  double local_bytes = 0;  ///< bytes of memory work on the busiest rank
};

/// Seconds per message (alpha), per byte through a link (beta), per byte of memory work (gamma).
struct Prices {
  double alpha = 0;
  double beta = 0;
  double gamma = 0;
};

inline double seconds(const Terms& t, const Prices& p) {
  return t.messages * p.alpha + t.link_bytes * p.beta + t.local_bytes * p.gamma;
}

/// How the gradients are combined.
enum class Exchange { ring, hierarchical, parameter_servers };

/// Who takes part, and where: `workers` ranks computing gradients, `ranks_per_host` of them on a
/// host (consecutive ranks; the hierarchical sum needs it to divide `workers`), and for parameter
/// servers `servers` more, each on a host of its own.
struct Layout {
  Exchange exchange = Exchange::ring;
  std::size_t workers = 1;
  std::size_t ranks_per_host = 1;
  std::size_t servers = 0;
};

/// What is exchanged each step: `values` gradients, sent as `wire_bytes` each (the codec's: 4 for
/// fp32, 2 for fp16), in `buckets` separate sums (a ring's gradient buckets; servers take one
/// message per shard whatever this says).
struct Payload {
  double values = 0;
  double wire_bytes = 4;
  double buckets = 1;
};

/// The counts of one step's exchange.
inline Terms terms(const Layout& layout, const Payload& payload) {
  const auto n = static_cast<double>(layout.workers);
  if (layout.workers == 0) throw ConfigError("cost::terms: a job needs at least one worker");
  const double v = payload.values, bytes = v * payload.wire_bytes, memory = 4 * v;
  switch (layout.exchange) {
    case Exchange::ring:
      return {2 * (n - 1) * payload.buckets, 2 * (n - 1) / n * bytes, 2 * (n - 1) / n * memory};
    case Exchange::hierarchical: {
      if (layout.ranks_per_host == 0 || layout.workers % layout.ranks_per_host != 0)
        throw ConfigError("cost::terms: " + std::to_string(layout.ranks_per_host) + " ranks per host do not divide " +
                          std::to_string(layout.workers) + " workers into whole hosts");
      const double l = static_cast<double>(layout.ranks_per_host), h = n / l;
      return {2 * h * payload.buckets, 2 * (h - 1) / h * bytes, (2 * (l - 1) / l + 2 * (h - 1) / h) * memory};
    }
    case Exchange::parameter_servers: {
      if (layout.servers == 0) throw ConfigError("cost::terms: parameter servers need at least one server");
      const double per_server = n / static_cast<double>(layout.servers);
      return {2 * n, (std::max(per_server, 1.0) + 1) * bytes, (per_server + 1) * memory};
    }
  }
  throw ConfigError("cost::terms: unknown exchange");
}

inline double seconds(const Layout& layout, const Payload& payload, const Prices& prices) {
  return seconds(terms(layout, payload), prices);
}

/// A measured step: its counts and how long it took.
struct Measurement {
  Terms terms;
  double seconds = 0;
};

/// The prices, none negative, that minimise the sum of squared relative errors of the
/// predictions over `points` (each point weighs alike, whether it took a millisecond or a minute).
/// A price that the points cannot tell from zero is zero.
inline Prices fit(std::span<const Measurement> points) {
  if (points.empty()) throw ConfigError("cost::fit: no measurements");
  for (const auto& m : points)
    if (!(m.seconds > 0) || !std::isfinite(m.seconds))
      throw ConfigError("cost::fit: a measurement of " + std::to_string(m.seconds) + " s (each must be positive)");
  const auto row = [](const Measurement& m) {
    return std::array<double, 3>{m.terms.messages / m.seconds, m.terms.link_bytes / m.seconds, m.terms.local_bytes / m.seconds};
  };
  // Least squares of (row . x - 1) on every subset of the prices, keeping the best whose prices
  // are all non-negative: three unknowns, so trying the seven subsets is the whole search.
  Prices best;
  double best_error = std::numeric_limits<double>::infinity();
  for (unsigned mask = 1; mask < 8; ++mask) {
    std::array<std::size_t, 3> idx{};
    std::size_t k = 0;
    for (std::size_t j = 0; j < 3; ++j)
      if (mask & (1u << j)) idx[k++] = j;
    // Normal equations, scaled so that each column has unit norm (the columns differ by many
    // orders of magnitude: messages against bytes).
    std::array<double, 3> scale{};
    for (const auto& m : points) {
      const auto r = row(m);
      for (std::size_t a = 0; a < k; ++a) scale[a] += r[idx[a]] * r[idx[a]];
    }
    bool usable = true;
    for (std::size_t a = 0; a < k; ++a) {
      if (!(scale[a] > 0)) usable = false;
      scale[a] = std::sqrt(scale[a]);
    }
    if (!usable) continue;
    std::array<std::array<double, 4>, 3> g{};
    for (const auto& m : points) {
      const auto r = row(m);
      for (std::size_t a = 0; a < k; ++a) {
        for (std::size_t b = 0; b < k; ++b) g[a][b] += r[idx[a]] / scale[a] * r[idx[b]] / scale[b];
        g[a][3] += r[idx[a]] / scale[a];
      }
    }
    // Gaussian elimination with partial pivoting.
    for (std::size_t c = 0; c < k && usable; ++c) {
      std::size_t p = c;
      for (std::size_t r = c + 1; r < k; ++r)
        if (std::abs(g[r][c]) > std::abs(g[p][c])) p = r;
      if (std::abs(g[p][c]) < 1e-12) {
        usable = false;
        break;
      }
      std::swap(g[c], g[p]);
      for (std::size_t r = 0; r < k; ++r) {
        if (r == c) continue;
        const double f = g[r][c] / g[c][c];
        for (std::size_t j = c; j < 4; ++j) g[r][j] -= f * g[c][j];
      }
    }
    if (!usable) continue;
    std::array<double, 3> x{};
    for (std::size_t a = 0; a < k; ++a) {
      x[idx[a]] = g[a][3] / g[a][a] / scale[a];
      if (x[idx[a]] < 0) usable = false;
    }
    if (!usable) continue;
    const Prices p{x[0], x[1], x[2]};
    double error = 0;
    for (const auto& m : points) {
      const double e = seconds(m.terms, p) / m.seconds - 1;
      error += e * e;
    }
    if (error < best_error) best_error = error, best = p;
  }
  if (!std::isfinite(best_error)) throw ConfigError("cost::fit: the measurements determine no prices");
  return best;
}

}  // namespace flotilla::cost
#endif  // FLOTILLA_TOPOLOGY_COSTMODEL_HPP_INCLUDED
