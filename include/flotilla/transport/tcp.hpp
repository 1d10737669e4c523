// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_TCP_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_TCP_HPP_INCLUDED
// The TCP transport: one process per rank, on one host or several. flotilla/flotilla.hpp does not
// include it (it needs Boost.Asio); include it yourself and link flotilla::tcp.
//
//   flotilla-launch -n 4 -- ./train          # on one machine: see tcp/launch.hpp
//   transport::Tcp::run(transport::TcpOptions::from_environment(), 4, [](transport::TcpEndpoint& e) { ... });
//
// Design, in short (docs/transports.md has the long form):
//  - Rendezvous: rank 0 listens at the coordinator's host:port; every other rank listens on an
//    ephemeral port of its bind address, registers (rank, host, port) with rank 0 and receives the
//    table of every rank's address. Rank 0's registration connections are its links; between the
//    other ranks the lower rank connects to the higher. Each connection starts with a hello both
//    ways (protocol version, world size, rank, job id), checked on both sides, and, when the job
//    has a shared secret, a challenge-response both ways (tcp/wire.hpp). A connection that fails
//    the handshake (garbage, another version, no or a wrong secret, nothing complete within 5 s) is
//    dropped and logged, and the rendezvous goes on; a peer that authenticates but disagrees on the
//    job ends it. The handshakes of all accepted connections are served together, each as its
//    bytes arrive, so that a silent or trickling connection holds up no other.
//  - Frames (tcp/wire.hpp): a 48-byte header with a CRC, then the payload. A header and its payload
//    go out in one gather write, straight from the caller's memory.
//  - Receiving: a frame whose receive is already posted, and whose size matches, is read straight
//    into the caller's buffer; other frames are read into memory of their own (after their length
//    has been checked) and queued per peer, so that tags can be received in any order.
//  - One thread, non-blocking Boost.Asio sockets (tcp/socket.hpp), one io_context per endpoint:
//    data moves with read_some/write_some straight from and to the caller's memory, and the loop
//    waits with async_wait (wait_read/wait_write) on the links it needs and run_one_until() up to
//    the deadline. Waits stay armed across iterations and operations; every open link has a read
//    wait (but one parked with data that nothing needs yet, read at the next stall), so that a
//    peer's hang-up ends the wait at once. sendrecv writes and reads at once,
//    alternating quanta of 256 KiB so that both directions flow together and what arrives is read
//    while it is still in cache (faster at 64 MiB than writing all the socket takes: docs/benchmarks.md,
//    "Allreduce bus bandwidth: TCP transport, Open MPI, gloo").
//    A send that waits for its socket reads what the other peers send meanwhile, a frame a peer,
//    and returns once at most TcpOptions::unsent_limit_bytes of it wait unsent (TCP_NOTSENT_LOWAT):
//    sends to several peers (a parameter server's replies) leave one after the other, and the
//    peers' next messages flow in meanwhile. Otherwise links that the operation in progress does
//    not need are left unread (their data waits in the kernel, where it costs no copy) until the
//    reactor has seen no progress for a moment; then everything pending is read, so that two ranks
//    that both send large messages before receiving cannot deadlock.
//  - Every wait ends by the timeout with a TransportError naming this rank, the peer, its host:port
//    and the operation. A peer whose connection ends is reported at once, whatever this rank was
//    waiting for. A rank whose body throws tells its peers why (an abort frame) before it closes.
//  - Heartbeats: a second thread per endpoint sends a heartbeat frame on every connection each
//    heartbeat interval (between the endpoint's frames, never inside one: the two share a lock per
//    connection), also while the rank computes. A wait on a peer that has sent nothing for
//    heartbeat_misses intervals fails with PeerLostError: it is stopped, hung or unreachable.
//  - Rejoining: every rank but 0 keeps its rendezvous listener. One told to accept rejoins (a
//    parameter server going on without lost workers) runs the same handshakes, a step at a time
//    while its operations wait, on the connections that arrive there, and reopens the link of a
//    lost rank that restarted with TcpOptions::rejoin (a rank still alive is refused); the
//    restarted rank connects only to the ranks it names, and takes the others as lost
//    (docs/reliability.md, "Rejoining").
//  - Ranks on one host sum float buffers through a shared-memory segment instead of their sockets
//    (TcpOptions::shared_memory, on by default for them; tcp/shared_memory.hpp); a job over several
//    hosts sums hierarchically, each host through its segment and the hosts' leaders over a ring
//    (tcp/host_allreduce.hpp): the endpoint's own allreduce_sum, agreed on and set up during
//    connect() over the authenticated connections.
//  - Shutdown: every rank sends a goodbye on each connection and closes only once it has a goodbye
//    from every peer, so that no rank closes a connection that another still reads.
//
// The pieces, in namespace transport::tcp (internals in transport::tcp::detail), one concept each:
//   tcp/options.hpp        Options: the settings, from the environment
//   tcp/flags.hpp          Flags: the settings as command-line flags
//   tcp/socket.hpp         sockets, listening, connecting, waiting, through Boost.Asio
//   tcp/wire.hpp           the wire format: frames, the handshake's messages (namespace tcp::wire)
//   tcp/link.hpp           a connection to one peer, and the heartbeats sent on it
//   tcp/rendezvous.hpp     how the ranks find each other and authenticate every connection
//   tcp/shared_memory.hpp  the sum through shared memory of ranks on one host
//   tcp/host_identity.hpp  which processes share a host
//   tcp/host_allreduce.hpp the sum over hosts: each host's segment, a ring of the hosts' leaders
//   tcp/endpoint.hpp       Endpoint: one rank's operations (and endpoint_*.hpp beside it)
//   tcp/backend.hpp        Backend: run(), a rank's whole life
//   tcp/launch.hpp         launch(), run_job(): starting the ranks of a job on this machine
// This header includes them all and gives them the names programs use (transport::Tcp,
// transport::TcpOptions, ...).
#include "flotilla/transport/group.hpp"
#include "flotilla/transport/tcp/backend.hpp"
#include "flotilla/transport/tcp/endpoint.hpp"
#include "flotilla/transport/tcp/flags.hpp"
#include "flotilla/transport/tcp/launch.hpp"
#include "flotilla/transport/tcp/options.hpp"
#include "flotilla/transport/tcp/wire.hpp"

namespace flotilla::transport {

using Tcp = tcp::Backend;
using TcpOptions = tcp::Options;
using TcpSharedMemory = tcp::SharedMemory;
using TcpDataChecksums = tcp::DataChecksums;
using TcpFrameMacs = tcp::FrameMacs;
using TcpFlags = tcp::Flags;
using TcpEndpoint = tcp::Endpoint;
namespace wire = tcp::wire;

using LaunchOptions = tcp::LaunchOptions;
using RankExit = tcp::RankExit;
using LaunchResult = tcp::LaunchResult;
using JobResult = tcp::JobResult;
using tcp::launch;
using tcp::pick_free_port;
using tcp::run_job;

// The abilities the rest of flotilla asks for by name (concepts/transport.hpp): a TCP endpoint has
// them all. Stated here so that a change to a member's signature cannot quietly turn one off.
static_assert(Transport<TcpEndpoint> && KnowsRanksOnHost<TcpEndpoint> && BoundedNativeAllreduce<TcpEndpoint> &&
              HostHierarchy<TcpEndpoint> && HostHierarchy<Group<TcpEndpoint>> &&
              OperationAware<TcpEndpoint> && ReportsLostPeers<TcpEndpoint> && SurvivableEndpoint<TcpEndpoint> &&
              Rejoinable<TcpEndpoint>);

}  // namespace flotilla::transport
#endif  // FLOTILLA_TRANSPORT_TCP_HPP_INCLUDED
