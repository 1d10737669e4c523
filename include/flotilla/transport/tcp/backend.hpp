// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_TCP_BACKEND_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_TCP_BACKEND_HPP_INCLUDED
// The TCP transport as a backend of the Transport concept (Backend, transport::Tcp): run() is a
// whole rank's life, from the rendezvous to the orderly end or the abort that tells the peers why.
#include <cstddef>
#include <exception>
#include <functional>
#include <string>
#include <string_view>

#include "flotilla/core/error.hpp"
#include "flotilla/transport/tcp/endpoint.hpp"
#include "flotilla/transport/tcp/launch_reports.hpp"
#include "flotilla/transport/tcp/options.hpp"

namespace flotilla::transport::tcp {

/// The TCP backend: run() connects this process's rank to the others, runs the body, and shuts
/// down in order (or, when the body throws, tells the peers and rethrows).
struct Backend {
  static constexpr std::string_view name = "tcp";
  static constexpr bool in_process = false;
  using options = Options;
  using endpoint = Endpoint;

  static void run(const options& o, std::size_t ranks, const std::function<void(endpoint&)>& body) {
    detail::tcp_validate(o);
    // ranks == 0: the job is as the launcher started it.
    if (ranks != 0 && o.world_size != ranks)
      throw ConfigError("Tcp::run: the job needs " + std::to_string(ranks) + " ranks, but this process was started as rank " +
                        std::to_string(o.rank) + " of " + std::to_string(o.world_size) +
                        " (FLOTILLA_WORLD_SIZE=" + std::to_string(o.world_size) + "); start it with flotilla-launch -n " +
                        std::to_string(ranks) + " -- <program>, or set FLOTILLA_WORLD_SIZE=" + std::to_string(ranks) +
                        " on every rank");
    endpoint e = endpoint::connect(o);
    try {
      body(e);
    } catch (const std::exception& ex) {
      detail::tcp_report_failure(o.rank, e.failed_peer().value_or(o.rank));
      e.abort("rank " + std::to_string(o.rank) + " failed: " + ex.what());
      throw;
    } catch (...) {
      detail::tcp_report_failure(o.rank, e.failed_peer().value_or(o.rank));
      e.abort("rank " + std::to_string(o.rank) + " failed");
      throw;
    }
    try {
      e.close();
    } catch (...) {
      detail::tcp_report_failure(o.rank, e.failed_peer().value_or(o.rank));
      throw;
    }
  }
};

}  // namespace flotilla::transport::tcp
#endif  // FLOTILLA_TRANSPORT_TCP_BACKEND_HPP_INCLUDED
