// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_MPI_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_MPI_HPP_INCLUDED
// The MPI transport: one rank per process, for jobs started by mpirun (or srun, or any launcher of
// the MPI library in use). Needs <mpi.h> and the MPI library: link flotilla::mpi (CMake option
// FLOTILLA_WITH_MPI) rather than flotilla::flotilla. flotilla/flotilla.hpp does not include this
// header, so the rest of flotilla never depends on MPI.
//
//   transport::Mpi::run({}, 4, [](transport::MpiEndpoint& e) { ... });   // under mpirun -n 4
//
// Design, in short (docs/transports.md, section "MPI", has the long form):
//  - MPI is initialised on first use with MPI_Init_thread(MPI_THREAD_SERIALIZED) and finalised at
//    process exit, and only if flotilla initialised it. A program that calls MPI itself initialises
//    it first (MPI_Init_thread, at least MPI_THREAD_SERIALIZED) and finalises it last; flotilla then
//    neither initialises nor finalises.
//  - Each endpoint works on duplicates of MPI_COMM_WORLD (or of the communicator in the options),
//    so that no message of the program's own MPI code can match one of flotilla's.
//  - Flotilla's 32-bit tags travel as MPI tags where MPI_TAG_UB allows, and are folded onto a
//    communicator of their own, with the tag in the message, where it does not (MpiEndpoint::route).
//  - Every wait is a non-blocking operation polled against a deadline, so a dead or stuck peer
//    ends in a TransportError naming this rank, the peer and the operation, never in a hang. The
//    one exception is allreduce_sum, which runs the blocking MPI_Allreduce (several times faster
//    than MPI_Iallreduce) under a watchdog that ends the job when it outlasts the timeout, or,
//    without abort_on_failure, after a polled barrier that bounds the wait for every rank (see there).
//  - When the body fails on one rank of several, run() prints the error naming the rank and calls
//    MPI_Abort, which stops the whole job: MPI has no portable way to wake the other ranks, which
//    may be blocked anywhere (in their own MPI calls, too).
//
// The pieces, in namespace transport::mpi (internals in transport::mpi::detail), one concept each:
//   mpi/options.hpp   Options: communicator, timeout, failure handling, tags
//   mpi/environment.hpp   MPI's initialisation and finalisation
//   mpi/messages.hpp  how messages are described to MPI (long runs of bytes, folded tags)
//   mpi/waiting.hpp   polling with backoff, and the watchdog of blocking calls
//   mpi/endpoint.hpp  Endpoint: one rank's operations
//   mpi/backend.hpp   Backend: run(), a rank's whole life
// This header includes them all and gives them the names programs use (transport::Mpi,
// transport::MpiOptions, transport::MpiEndpoint).
#include "flotilla/transport/mpi/backend.hpp"
#include "flotilla/transport/mpi/endpoint.hpp"
#include "flotilla/transport/mpi/options.hpp"

namespace flotilla::transport {

using Mpi = mpi::Backend;
using MpiOptions = mpi::Options;
using MpiEndpoint = mpi::Endpoint;

// The abilities the rest of flotilla asks for by name (concepts/transport.hpp), stated so that a
// change to a member's signature cannot quietly turn one off. MPI without ULFM cannot outlive a
// lost rank: it has none of the survival abilities.
static_assert(Transport<MpiEndpoint> && KnowsRanksOnHost<MpiEndpoint> && BoundedNativeAllreduce<MpiEndpoint> &&
              HostHierarchy<MpiEndpoint>);

}  // namespace flotilla::transport
#endif  // FLOTILLA_TRANSPORT_MPI_HPP_INCLUDED
