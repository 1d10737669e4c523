// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_SPARSE_ROWCLIENT_HPP_INCLUDED
#define FLOTILLA_SPARSE_ROWCLIENT_HPP_INCLUDED
// A worker's side of the embedding-row servers (sparse/row_server.hpp; the messages are in
// sparse/detail/row_protocol.hpp): pull the rows of a batch's keys, push their gradients, ask for a
// checkpoint, say done.
//
// A pull sends every server its request before it waits for any reply, so the servers look up
// their rows in parallel. The bytes moved are counted by kind (keys, values, headers; each way),
// so that a step's traffic can be compared with the formula in docs/sparse.md.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "flotilla/codec/fp32.hpp"
#include "flotilla/concepts/codec.hpp"
#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/sparse/detail/row_protocol.hpp"
#include "flotilla/sparse/row_table.hpp"

namespace flotilla::sparse {

struct RowClientOptions {
  /// The most keys one request to one server may carry (the servers' bound must be at least this).
  std::size_t max_keys_per_message = std::size_t{1} << 22;
};

/// Bytes a client moved so far, by kind. Differences between two reads give a step's.
struct RowTraffic {
  std::uint64_t header_bytes_sent = 0, header_bytes_received = 0;
  std::uint64_t key_bytes_sent = 0;
  std::uint64_t value_bytes_sent = 0, value_bytes_received = 0;

  std::uint64_t bytes_sent() const noexcept { return header_bytes_sent + key_bytes_sent + value_bytes_sent; }
  std::uint64_t bytes_received() const noexcept { return header_bytes_received + value_bytes_received; }
  friend bool operator==(const RowTraffic&, const RowTraffic&) = default;
};

template <class WireCodec = codec::Fp32>
  requires Codec<WireCodec, float>
class RowClient {
 public:
  /// `dims`: the width of each table, by index (as the servers added them).
  RowClient(std::vector<std::size_t> dims, std::size_t first_server, std::size_t servers, RowClientOptions options = {})
      : dims_(std::move(dims)), first_server_(first_server), servers_(servers), options_(options), parts_(servers) {
    if (servers_ == 0) throw ConfigError("row client: no servers");
    for (std::size_t t = 0; t < dims_.size(); ++t)
      if (dims_[t] == 0) throw ConfigError("row client: table " + std::to_string(t) + " has dim 0");
  }

  std::size_t servers() const noexcept { return servers_; }
  std::size_t first_server() const noexcept { return first_server_; }
  std::size_t dim(std::size_t table) const { return dims_.at(table); }
  const RowTraffic& traffic() const noexcept { return traffic_; }

  /// The rows of `keys` (distinct) of `table`, row-major into `rows` (keys.size() * dim), as of
  /// `step`: in synchronous training, after every step before it is applied. Without `create`,
  /// rows the servers do not hold come back with the values they would start with and are not
  /// created (what an evaluation wants: held-out IDs do not grow the table).
  template <Transport E>
  void pull(E& e, std::size_t table, std::uint64_t step, std::span<const std::uint64_t> keys, std::span<float> rows,
            bool create = true) {
    using detail::RowHeader;
    const std::size_t dim = check(table, keys.size(), rows.size(), "pull");
    split(keys);
    for (std::size_t s = 0; s < servers_; ++s) {
      auto& p = parts_[s];
      send_header(e, s, RowHeader{RowHeader::pull, static_cast<std::uint32_t>(table), create ? 0 : RowHeader::lookup_only, 0,
                                  step, p.keys.size()});
      if (p.keys.empty()) continue;
      out_.resize(detail::pull_payload_size<WireCodec>(p.keys.size()));
      detail::write_keys(out_.data(), p.keys.data(), p.keys.size());
      e.send(first_server_ + s, detail::row_tags::request_payload, out_);
      traffic_.key_bytes_sent += out_.size();
    }
    for (std::size_t s = 0; s < servers_; ++s) {
      auto& p = parts_[s];
      const RowHeader h = receive_header(e, s, "pull");
      if (h.count != p.keys.size() || h.table != table)
        throw TransportError("row client (rank " + std::to_string(e.rank()) + "): server " + std::to_string(s) +
                             " (rank " + std::to_string(first_server_ + s) + ") answered a pull of " +
                             std::to_string(p.keys.size()) + " keys of table " + std::to_string(table) + " with " +
                             std::to_string(h.count) + " rows of table " + std::to_string(h.table));
      if (p.keys.empty()) continue;
      // One server holds every key: its rows arrive in the caller's order, straight into `rows`.
      const bool in_place = p.keys.size() == keys.size();
      const std::span<float> decoded = in_place ? rows : (values_.resize(p.keys.size() * dim), std::span<float>(values_));
      if constexpr (detail::rows_travel_as_floats<WireCodec>) {
        e.recv(first_server_ + s, detail::row_tags::reply_payload, std::as_writable_bytes(decoded));
        traffic_.value_bytes_received += decoded.size_bytes();
      } else {
        in_.resize(detail::reply_payload_size<WireCodec>(p.keys.size(), dim));
        e.recv(first_server_ + s, detail::row_tags::reply_payload, in_);
        traffic_.value_bytes_received += in_.size();
        WireCodec::decode(std::span<const std::byte>(in_), decoded);
      }
      if (in_place) continue;
      for (std::size_t i = 0; i < p.positions.size(); ++i)
        std::copy_n(values_.begin() + static_cast<std::ptrdiff_t>(i * dim), dim,
                    rows.begin() + static_cast<std::ptrdiff_t>(p.positions[i] * dim));
    }
  }

  /// The gradients of the rows of `keys` (row-major, keys.size() * dim), for `step`. Every worker
  /// pushes every table every step (an empty `keys` too), or synchronous servers wait for it.
  template <Transport E>
  void push(E& e, std::size_t table, std::uint64_t step, std::span<const std::uint64_t> keys,
            std::span<const float> gradients) {
    using detail::RowHeader;
    const std::size_t dim = check(table, keys.size(), gradients.size(), "push");
    split(keys);
    for (std::size_t s = 0; s < servers_; ++s) {
      auto& p = parts_[s];
      const std::size_t n = p.keys.size();
      send_header(e, s, RowHeader{RowHeader::push, static_cast<std::uint32_t>(table), 0, 0, step, n});
      if (n == 0) continue;
      // One server takes every key: the gradients are encoded from the caller's buffer as they are.
      const bool in_place = n == keys.size();
      if (!in_place) {
        values_.resize(n * dim);
        for (std::size_t i = 0; i < n; ++i)
          std::copy_n(gradients.begin() + static_cast<std::ptrdiff_t>(p.positions[i] * dim), dim,
                      values_.begin() + static_cast<std::ptrdiff_t>(i * dim));
      }
      out_.resize(detail::push_payload_size<WireCodec>(n, dim));
      detail::write_keys(out_.data(), p.keys.data(), n);
      WireCodec::encode(in_place ? gradients : std::span<const float>(values_),
                        std::span<std::byte>(out_).subspan(n * detail::key_bytes));
      e.send(first_server_ + s, detail::row_tags::request_payload, out_);
      traffic_.key_bytes_sent += n * detail::key_bytes;
      traffic_.value_bytes_sent += out_.size() - n * detail::key_bytes;
    }
  }

  /// Asks every server to save its shards in `directory` (created if missing) once `step` is
  /// applied; true when all of them did. One worker asks (worker 0, by convention).
  template <Transport E>
  bool checkpoint(E& e, std::uint64_t step, const std::string& directory) {
    using detail::RowHeader;
    if (directory.empty() || directory.size() > detail::max_directory_bytes)
      throw ConfigError("row client: checkpoint directory of " + std::to_string(directory.size()) + " bytes (1 to " +
                        std::to_string(detail::max_directory_bytes) + " accepted)");
    for (std::size_t s = 0; s < servers_; ++s) {
      send_header(e, s, RowHeader{RowHeader::checkpoint, 0, 0, 0, step, directory.size()});
      e.send(first_server_ + s, detail::row_tags::request_payload,
             std::span<const std::byte>(reinterpret_cast<const std::byte*>(directory.data()), directory.size()));
    }
    bool all = true;
    for (std::size_t s = 0; s < servers_; ++s) {
      const RowHeader h = receive_header(e, s, "checkpoint");
      all = all && (h.flags & RowHeader::saved) != 0;
    }
    return all;
  }

  /// Tells every server this worker is finished.
  template <Transport E>
  void done(E& e) {
    using detail::RowHeader;
    for (std::size_t s = 0; s < servers_; ++s) send_header(e, s, RowHeader{RowHeader::done, 0, 0, 0, 0, 0});
  }

 private:
  struct Part {
    std::vector<std::uint64_t> keys;
    std::vector<std::size_t> positions;  // where each key is in the caller's list
  };

  std::size_t check(std::size_t table, std::size_t keys, std::size_t values, const char* op) const {
    if (table >= dims_.size())
      throw ConfigError("row client: " + std::string(op) + " of table " + std::to_string(table) + ", but there are " +
                        std::to_string(dims_.size()) + " tables");
    const std::size_t dim = dims_[table];
    if (values != keys * dim)
      throw ShapeError("row client: " + std::string(op) + " of " + std::to_string(keys) + " rows of table " +
                       std::to_string(table) + " (dim " + std::to_string(dim) + ") with " + std::to_string(values) +
                       " values");
    return dim;
  }

  void split(std::span<const std::uint64_t> keys) {
    for (auto& p : parts_) {
      p.keys.clear();
      p.positions.clear();
    }
    if (servers_ == 1) {  // every key is the one server's, in the caller's order
      parts_[0].keys.assign(keys.begin(), keys.end());
      parts_[0].positions.resize(keys.size());
      std::iota(parts_[0].positions.begin(), parts_[0].positions.end(), std::size_t{0});
    } else {
      for (std::size_t i = 0; i < keys.size(); ++i) {
        auto& p = parts_[owner_of(keys[i], servers_)];
        p.keys.push_back(keys[i]);
        p.positions.push_back(i);
      }
    }
    for (std::size_t s = 0; s < servers_; ++s)
      if (parts_[s].keys.size() > options_.max_keys_per_message)
        throw ConfigError("row client: " + std::to_string(parts_[s].keys.size()) + " keys for server " +
                          std::to_string(s) + " in one message, more than max_keys_per_message (" +
                          std::to_string(options_.max_keys_per_message) + ")");
  }

  template <Transport E>
  void send_header(E& e, std::size_t s, const detail::RowHeader& h) {
    h.write(header_.data());
    e.send(first_server_ + s, detail::row_tags::request, header_);
    traffic_.header_bytes_sent += header_.size();
  }

  template <Transport E>
  detail::RowHeader receive_header(E& e, std::size_t s, const char* op) {
    e.recv(first_server_ + s, detail::row_tags::reply, header_);
    traffic_.header_bytes_received += header_.size();
    const auto h = detail::RowHeader::read(header_.data());
    if (h.kind != detail::RowHeader::reply)
      throw TransportError("row client (rank " + std::to_string(e.rank()) + "): server " + std::to_string(s) +
                           " (rank " + std::to_string(first_server_ + s) + ") answered a " + op +
                           " with a message of kind " + std::to_string(h.kind));
    return h;
  }

  std::vector<std::size_t> dims_;
  std::size_t first_server_, servers_;
  RowClientOptions options_;
  std::vector<Part> parts_;
  std::array<std::byte, detail::RowHeader::size> header_{};
  std::vector<std::byte> out_, in_;
  std::vector<float> values_;
  RowTraffic traffic_;
};

}  // namespace flotilla::sparse
#endif  // FLOTILLA_SPARSE_ROWCLIENT_HPP_INCLUDED
