// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_MPI_MESSAGES_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_MPI_MESSAGES_HPP_INCLUDED
// How flotilla's messages are described to MPI: runs of bytes of any length (MPI's counts are int),
// folded messages that carry their flotilla tag, and the MPI datatype of a sum's elements.
#include <mpi.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/transport/mpi/environment.hpp"

namespace flotilla::transport::mpi {

namespace detail {

/// `n` contiguous bytes as an MPI (count, datatype) pair. MPI-3 counts are int; beyond INT_MAX bytes
/// a derived type (1 GiB blocks and the remainder) describes the whole run with a count of 1, and
/// the receiver learns the size in bytes from MPI_Get_elements_x, whatever type the sender used.
class MpiBytes {
 public:
  explicit MpiBytes(std::size_t n) {
    if (n <= static_cast<std::size_t>(INT_MAX)) {
      count_ = static_cast<int>(n);
      return;
    }
    constexpr std::size_t block = std::size_t{1} << 30;
    MPI_Datatype one_block = MPI_DATATYPE_NULL, blocks = MPI_DATATYPE_NULL;
    MPI_Type_contiguous(static_cast<int>(block), MPI_BYTE, &one_block);
    MPI_Type_contiguous(static_cast<int>(n / block), one_block, &blocks);
    int lengths[2] = {1, static_cast<int>(n % block)};
    MPI_Aint displacements[2] = {0, static_cast<MPI_Aint>(n / block * block)};
    MPI_Datatype types[2] = {blocks, MPI_BYTE};
    MPI_Type_create_struct(2, lengths, displacements, types, &type_);
    MPI_Type_commit(&type_);
    MPI_Type_free(&blocks);
    MPI_Type_free(&one_block);
    count_ = 1;
    owned_ = true;
  }
  ~MpiBytes() {
    if (owned_) MPI_Type_free(&type_);
  }
  MpiBytes(const MpiBytes&) = delete;
  MpiBytes& operator=(const MpiBytes&) = delete;

  int count() const noexcept { return count_; }
  MPI_Datatype type() const noexcept { return type_; }

 private:
  MPI_Datatype type_ = MPI_BYTE;
  int count_ = 0;
  bool owned_ = false;
};

template <class T>
MPI_Datatype mpi_datatype() {
  if constexpr (std::is_same_v<T, float>)
    return MPI_FLOAT;
  else
    return MPI_DOUBLE;
}

/// A folded message (see MpiEndpoint::route) as one MPI message: the 4-byte flotilla tag, then the
/// payload, described by absolute addresses (used with MPI_BOTTOM), so that neither is copied.
class MpiFramed {
 public:
  MpiFramed(const void* header, const void* payload, std::size_t bytes) {
    const MpiBytes body(bytes);
    MPI_Aint addresses[2] = {0, 0};
    MPI_Get_address(header, &addresses[0]);
    MPI_Get_address(payload, &addresses[1]);
    int lengths[2] = {4, body.count()};
    MPI_Datatype types[2] = {MPI_BYTE, body.type()};
    MPI_Type_create_struct(2, lengths, addresses, types, &type_);
    MPI_Type_commit(&type_);
  }
  ~MpiFramed() { MPI_Type_free(&type_); }  // allowed while an operation uses it: MPI defers the free
  MpiFramed(const MpiFramed&) = delete;
  MpiFramed& operator=(const MpiFramed&) = delete;

  MPI_Datatype type() const noexcept { return type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

}  // namespace detail

}  // namespace flotilla::transport::mpi
#endif  // FLOTILLA_TRANSPORT_MPI_MESSAGES_HPP_INCLUDED
