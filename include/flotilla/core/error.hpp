// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_ERROR_HPP_INCLUDED
#define FLOTILLA_CORE_ERROR_HPP_INCLUDED
// The exceptions flotilla throws. Every message names the problem and the place (file and offset,
// layer, peer, flag) so that a user can act on it without a debugger.
#include <cstdint>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

namespace flotilla {

/// Base of every exception flotilla throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A data file (IDX, gzip) is missing, malformed or inconsistent.
class DataError : public Error {
 public:
  DataError(std::string file, std::uint64_t offset, const std::string& what)
      : Error(file + " (byte " + std::to_string(offset) + "): " + what),
        file_(std::move(file)),
        offset_(offset) {}
  const std::string& file() const noexcept { return file_; }
  std::uint64_t offset() const noexcept { return offset_; }

 private:
  std::string file_;
  std::uint64_t offset_;
};

/// A checkpoint cannot be written, or what was read back does not verify.
class CheckpointError : public Error {
 public:
  using Error::Error;
  CheckpointError(const std::string& what, std::error_code cause) : Error(what), cause_(cause) {}
  /// The operating system's error when one made a write fail (ENOSPC: the disk is full); empty
  /// otherwise.
  std::error_code cause() const noexcept { return cause_; }

 private:
  std::error_code cause_;
};

/// A run was configured with values that cannot work (batch size 0, missing file, bad flag).
class ConfigError : public Error {
 public:
  using Error::Error;
};

/// Communication failed: a peer closed or timed out, sent a malformed or unexpected message, or
/// the job was aborted because another rank failed. The message names this rank, the peer, and
/// the operation in flight.
class TransportError : public Error {
 public:
  using Error::Error;
};

/// A peer died or stalled (its connection closed, or it sent nothing, not even a heartbeat, for the
/// transport's bound). `peer()` is its rank; what() names it, its host and the operation in flight.
/// Topologies that can go on without a peer (asynchronous parameter servers) catch this one.
class PeerLostError : public TransportError {
 public:
  PeerLostError(const std::string& what, std::size_t peer) : TransportError(what), peer_(peer) {}
  std::size_t peer() const noexcept { return peer_; }

 private:
  std::size_t peer_;
};

/// Training diverged: the loss of a batch is not a finite number (NaN or infinite), so every
/// update from there on would be too. what() names the worker, the update, the epoch and the batch.
class DivergenceError : public Error {
 public:
  DivergenceError(const std::string& what, std::uint64_t step) : Error(what), step_(step) {}
  /// The update whose batch gave the non-finite loss (1 first).
  std::uint64_t step() const noexcept { return step_; }

 private:
  std::uint64_t step_;
};

/// Tensors passed to a layer, loss or optimizer disagree in shape.
class ShapeError : public Error {
 public:
  using Error::Error;
};

}  // namespace flotilla
#endif  // FLOTILLA_CORE_ERROR_HPP_INCLUDED
