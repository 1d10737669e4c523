// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_TCP_SHAREDMEMORY_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_TCP_SHAREDMEMORY_HPP_INCLUDED
// A sum-allreduce among the ranks of one host through one POSIX shared-memory segment: the TCP
// transport's path for ranks on the same machine (TcpOptions::shared_memory).
//
// Over loopback TCP every byte is copied into the kernel by its sender and out again by its
// receiver, and the kernel's TCP processing comes on top. Through a mapping that both ranks share
// it costs a fraction of that: each rank copies its values in once, and reads the others' straight
// from the segment while it adds (docs/benchmarks.md, "Shared-memory allreduce").
//
// Layout: a control block (each rank's progress counter on a cache line of its own), then two
// sets (alternating calls) of one slot per rank of `capacity` bytes. Call c on rank r:
//   1. copies its values into its slot of set c % 2: all of them for a small sum or for two
//      ranks, else only the other ranks' chunks (chunks as in the ring), the parts they will
//      read; counter 2c+1;
//   2. two ranks: when the other's counter is >= 2c+1, adds all the other's values to its own,
//      and the call is done. Both ranks form every element as rank 0's value plus rank 1's, so
//      both end with the same bits. One wait per call: the least a sum can wait for. (Pieces of
//      at most pair_piece_max_bytes; docs/benchmarks.md, "Shared-memory allreduce", has the
//      measurements.)
//   3. more ranks: when every counter is >= 2c+1, sums chunk r, its own values plus that chunk of
//      every other slot, into its slot and its values; counter 2c+2;
//   4. when every counter is >= 2c+2, copies every other chunk's sum from the slot of the rank
//      that formed it. Every rank so ends with the same bits: each chunk is formed by one rank.
// Which copy is faster for more ranks depends on the size (whole_copy_max_bytes, measured).
// A rank writes set c % 2 again only in call c+2, after it has seen every counter reach 2c+3 in
// call c+1's first wait: a rank moves its counter there only once it has finished reading call c.
// So no wait is needed for the reuse: one wait per call for two ranks, two for more.
//
// Across hosts (host_allreduce.hpp) the segment joins the ranks of one host, and a call is two
// halves around the host leaders' ring over the sockets; call c on local rank r:
//   reduce_to_first:      copies its values into its slot of set c % 2, counter 2c+1; local rank
//                         0 (the leader) waits for every counter >= 2c+1 and adds the others' slots
//                         to its values in local rank order;
//   broadcast_from_first: the leader copies the total into its slot, counter 2c+2; the others wait
//                         for its counter >= 2c+2, copy the total, and move their counters to 2c+2.
// The reuse argument is the one above: the leader reads a set's slots before it moves its counter
// to 2c+2, which every rank has seen before its call c+2, and the others' reads of the leader's
// slot end before their counters reach 2c+3, which the leader waits for in call c+1.
//
// Waiting spins for up to 200 microseconds (yielding to other runnable threads), then sleeps on a
// futex shared between the processes, in slices of at most 10 ms, between which it checks the
// deadline, whether a peer's TCP connection has closed (a process that dies closes its
// sockets): a lost peer fails the call naming it at once, and whether the peer waited for still
// sends heartbeats on its socket (Watch::check_alive): a stopped one is named after the stall
// limit, as on the sockets' path. A sleeper says so in the counter's
// cache line first, and a rank that moves its counter makes the futex call only when someone
// does: the common case, a peer still spinning, costs no system call.
//
// Setup (TcpEndpoint::negotiate_shared_memory, in connect()): rank 0 creates the segment under a
// random name, mode 0600, and sends the name to the others over their authenticated connections;
// each maps it and answers; rank 0 removes the name as soon as all have answered (or failed), so
// the segment disappears with the last process that maps it, whatever way the job ends.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <utility>

#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/thread_pool.hpp"
#include "flotilla/transport/tcp/socket.hpp"

namespace flotilla::transport::tcp::detail {

/// Whether this platform has the shared-memory allreduce (Linux: it waits on futexes).
#if defined(__linux__)
inline constexpr bool shared_memory_allreduce_available = true;
#else
inline constexpr bool shared_memory_allreduce_available = false;
#endif

/// The bytes a piece of a shared-memory sum may have (TcpOptions::shared_memory_bytes), checked
/// in the options and in every setting a rank receives from another.
inline constexpr bool shared_memory_piece_bytes_valid(std::size_t bytes) noexcept {
  return bytes >= 64 && bytes <= (std::size_t{1} << 30);
}

/// The tag of the setup messages (the segment's name, each rank's answer, rank 0's verdict).
inline constexpr Tag shared_memory_setup_tag = flotilla::detail::reserved_tag("shared_memory_setup");

class SharedMemoryAllreduce {
 public:
  static constexpr std::uint64_t magic = 0x666c6f7473686d31ull;  // "flotshm1"
  static constexpr std::size_t line = 64;

  /// A fresh segment name: /flotilla-<pid>-<128 random bits in hex>.
  static std::string random_name() {
    std::random_device rd;
    std::string name = "/flotilla-" + std::to_string(::getpid()) + "-";
    static constexpr char hex[] = "0123456789abcdef";
    for (int i = 0; i < 4; ++i) {
      const std::uint32_t v = rd();
      for (int k = 0; k < 8; ++k) name += hex[(v >> (4 * k)) & 0xf];
    }
    return name;
  }

  /// Rank 0: creates the segment for `ranks` ranks and `capacity` bytes per call.
  static SharedMemoryAllreduce create(const std::string& name, std::size_t ranks, std::size_t capacity) {
    const Fd fd(::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
    if (!fd) throw TransportError("shared memory: cannot create segment " + name + ": " + errno_text(errno));
    SharedMemoryAllreduce s(0, ranks, capacity);
    try {
      // Sizes the segment and reserves its pages now: a /dev/shm too small for them (64 MiB in a
      // default Docker container) is then this clear error, not a SIGBUS in the middle of a sum.
      if (const int e = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(s.bytes_)); e != 0)
        throw TransportError("shared memory: cannot reserve " + std::to_string(s.bytes_) + " bytes for segment " + name +
                             ": " + errno_text(e) + " (is /dev/shm large enough?)");
      s.map(fd.get(), name);
    } catch (...) {
      ::shm_unlink(name.c_str());
      throw;
    }
    auto* c = s.control();
    c->ranks = ranks;
    c->capacity = capacity;
    std::atomic_ref<std::uint64_t>(c->magic).store(magic, std::memory_order_release);
    return s;
  }

  /// Rank `rank` of `ranks`: maps the segment rank 0 created, checking that it is what all agreed.
  static SharedMemoryAllreduce open(const std::string& name, std::size_t rank, std::size_t ranks, std::size_t capacity) {
    const Fd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0));
    if (!fd)
      throw TransportError("shared memory: cannot open segment " + name + ": " + errno_text(errno) +
                           " (are all ranks on one host, sharing /dev/shm?)");
    SharedMemoryAllreduce s(rank, ranks, capacity);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || static_cast<std::size_t>(st.st_size) != s.bytes_)
      throw TransportError("shared memory: segment " + name + " has " + std::to_string(st.st_size) + " bytes, not the " +
                           std::to_string(s.bytes_) + " expected");
    s.map(fd.get(), name);
    const auto* c = s.control();
    if (std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(c->magic)).load(std::memory_order_acquire) != magic ||
        c->ranks != ranks || c->capacity != capacity)
      throw TransportError("shared memory: segment " + name + " was not made for this job (" + std::to_string(ranks) +
                           " ranks, " + std::to_string(capacity) + " bytes)");
    return s;
  }

  SharedMemoryAllreduce(SharedMemoryAllreduce&& o) noexcept
      : rank_(o.rank_), ranks_(o.ranks_), capacity_(o.capacity_), bytes_(o.bytes_), base_(std::exchange(o.base_, nullptr)),
        calls_(o.calls_) {}
  SharedMemoryAllreduce& operator=(SharedMemoryAllreduce&&) = delete;
  SharedMemoryAllreduce(const SharedMemoryAllreduce&) = delete;
  ~SharedMemoryAllreduce() {
    if (base_) ::munmap(base_, bytes_);
  }

  /// What the waits need from the caller: the deadline of each call, which peer (if any) is known
  /// to be gone, and names for the error: this rank's, and a peer's (with its host).
  struct Watch {
    std::chrono::milliseconds timeout;
    std::function<std::optional<std::size_t>()> lost_peer;
    std::function<std::string()> who;
    std::function<std::string(std::size_t)> peer_name;
    /// Throws PeerLostError when the peer waited for (its rank) has been silent on its socket, not
    /// even a heartbeat, for the stall limit since the later of its last frame and the start of
    /// the wait (the time passed). A stopped process keeps its connections open: without this
    /// a wait for one would end only at `timeout`.
    std::function<void(std::size_t, std::chrono::steady_clock::time_point)> check_alive;
  };

  /// Sums `values` over every rank (all must call with the same count, in the same order of
  /// calls); buffers over the capacity (two ranks: over pair_piece_max_bytes) go in pieces.
  /// Adds to `counted` the bytes that moved (TrafficCounters::shared_memory_bytes_*): for each
  /// piece of n values, two ranks read all n of each other's; more ranks read the others' values
  /// of their own chunk c, and the others' sums of the rest, n - c, so each rank's c is read N-1
  /// times by the others and the rest of its n once.
  template <class T>
  void allreduce_sum(std::span<T> values, const Watch& w, TrafficCounters& counted) {
    if (ranks_ < 2) return;
    const std::size_t piece_bytes = ranks_ == 2 ? std::min(capacity_, pair_piece_max_bytes) : capacity_;
    const std::size_t piece = std::max<std::size_t>(1, piece_bytes / sizeof(T));
    for (std::size_t at = 0; at < values.size(); at += piece) {
      // What this rank read of the others' equals what they read of this rank's (every chunk is read
      // the same way), so one count serves both.
      const std::size_t read = one_call(values.subspan(at, std::min(piece, values.size() - at)), w);
      counted.shared_memory_bytes_sent += read * sizeof(T);
      counted.shared_memory_bytes_received += read * sizeof(T);
    }
  }

  /// The first half of a sum across hosts (see the header): local rank 0 ends with the sum of
  /// every local rank's `values`; the others' values are unchanged. At most capacity() bytes.
  /// Returns the values this rank read from the others' slots.
  template <class T>
  std::size_t reduce_to_first(std::span<T> values, const Watch& w) {
    const std::size_t n = values.size();
    const auto c = static_cast<std::uint32_t>(calls_);
    std::memcpy(slot(calls_ % 2, rank_), values.data(), n * sizeof(T));
    signal(2 * c + 1);
    if (rank_ != 0) return 0;
    wait_all(2 * c + 1, std::chrono::steady_clock::now() + w.timeout, w);
    T* total = values.data();
    for (std::size_t r = 1; r < ranks_; ++r) {
      const T* other = reinterpret_cast<const T*>(slot(calls_ % 2, r));
      for (std::size_t i = 0; i < n; ++i) total[i] += other[i];
    }
    return (ranks_ - 1) * n;
  }

  /// The second half: every local rank ends with local rank 0's `values`. Returns the values this
  /// rank read from the others' slots.
  template <class T>
  std::size_t broadcast_from_first(std::span<T> values, const Watch& w) {
    const std::size_t n = values.size(), set = calls_ % 2;
    const auto c = static_cast<std::uint32_t>(calls_);
    ++calls_;
    if (rank_ == 0) {
      std::memcpy(slot(set, 0), values.data(), n * sizeof(T));
      signal(2 * c + 2);
      return 0;
    }
    wait_for(0, 2 * c + 2, std::chrono::steady_clock::now() + w.timeout, w);
    std::memcpy(values.data(), slot(set, 0), n * sizeof(T));
    signal(2 * c + 2);
    return n;
  }


 private:
  struct alignas(line) Control {
    std::uint64_t magic;
    std::uint64_t ranks;
    std::uint64_t capacity;
  };
  struct alignas(line) Counter {
    std::atomic<std::uint32_t> value;
    std::atomic<std::uint32_t> sleepers;  // ranks asleep on `value` (or about to be)
  };
  static_assert(std::atomic<std::uint32_t>::is_always_lock_free && sizeof(std::atomic<std::uint32_t>) == 4);

  SharedMemoryAllreduce(std::size_t rank, std::size_t ranks, std::size_t capacity)
      : rank_(rank), ranks_(ranks), capacity_((capacity + line - 1) / line * line) {
    bytes_ = sizeof(Control) + ranks_ * sizeof(Counter) + 2 * ranks_ * capacity_;
  }

  void map(int fd, const std::string& name) {
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
      throw TransportError("shared memory: cannot map segment " + name + ": " + errno_text(errno));
    base_ = static_cast<std::byte*>(p);
  }

  Control* control() const noexcept { return reinterpret_cast<Control*>(base_); }
  Counter& counter_line(std::size_t r) const noexcept { return reinterpret_cast<Counter*>(base_ + sizeof(Control))[r]; }
  std::atomic<std::uint32_t>& counter(std::size_t r) const noexcept { return counter_line(r).value; }
  std::byte* slot(std::size_t set, std::size_t r) const noexcept {
    return base_ + sizeof(Control) + ranks_ * sizeof(Counter) + (set * ranks_ + r) * capacity_;
  }

  /// One call of the protocol; returns how many values this rank read from the others' slots.
  template <class T>
  std::size_t one_call(std::span<T> values, const Watch& w) {
    const std::size_t n = values.size(), set = calls_ % 2;
    const auto c = static_cast<std::uint32_t>(calls_);
    const auto deadline = std::chrono::steady_clock::now() + w.timeout;
    T* own = reinterpret_cast<T*>(slot(set, rank_));
    T* mine = values.data();
    if (ranks_ == 2) {  // steps 1 and 2 of the header's protocol
      std::memcpy(own, mine, n * sizeof(T));
      signal(2 * c + 1);
      wait_all(2 * c + 1, deadline, w);
      const T* other = reinterpret_cast<const T*>(slot(set, 1 - rank_));
      rank_ == 0 ? add_in_rank_order<true>(mine, other, n) : add_in_rank_order<false>(mine, other, n);
      ++calls_;
      return n;
    }
    const auto [b, e] = flotilla::detail::split_range(n, ranks_, rank_);
    // Small sums publish the whole buffer and add into the slot; larger ones publish only what the
    // others read, [0, b) and [e, n), and form their own chunk in one pass (see whole_copy_max_bytes).
    const bool whole = n * sizeof(T) <= whole_copy_max_bytes;
    if (whole) {
      std::memcpy(own, mine, n * sizeof(T));
    } else {
      std::memcpy(own, mine, b * sizeof(T));
      std::memcpy(own + e, mine + e, (n - e) * sizeof(T));
    }
    signal(2 * c + 1);
    wait_all(2 * c + 1, deadline, w);
    // This rank forms the sum of its chunk once, into its values and its slot; the others copy it.
    // The order of the additions (its own values first, then the others by rank) is fixed, and
    // only this rank forms the chunk, so every rank ends with the same bits.
    bool seeded = whole;  // whether the slot's chunk holds this rank's values yet
    for (std::size_t r = 0; r < ranks_; ++r) {
      if (r == rank_) continue;
      const T* other = reinterpret_cast<const T*>(slot(set, r));
      if (seeded) {
        for (std::size_t i = b; i < e; ++i) own[i] += other[i];
      } else {
        for (std::size_t i = b; i < e; ++i) own[i] = mine[i] + other[i];
        seeded = true;
      }
    }
    std::memcpy(mine + b, own + b, (e - b) * sizeof(T));
    signal(2 * c + 2);
    wait_all(2 * c + 2, deadline, w);
    for (std::size_t r = 0; r < ranks_; ++r) {
      if (r == rank_) continue;
      const auto [rb, re] = flotilla::detail::split_range(n, ranks_, r);
      std::memcpy(mine + rb, reinterpret_cast<const T*>(slot(set, r)) + rb, (re - rb) * sizeof(T));
    }
    ++calls_;
    return (ranks_ - 1) * (e - b) + (n - (e - b));  // the others' values of this chunk, their sums of the rest
  }

  /// Adds `other` to `mine` with rank 0's value as the first operand, so that both ranks form
  /// the same bits (NaN payloads included): mine + other on rank 0, other + mine on rank 1.
  template <bool MineIsRank0, class T>
  static void add_in_rank_order(T* __restrict mine, const T* __restrict other, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) mine[i] = MineIsRank0 ? mine[i] + other[i] : other[i] + mine[i];
  }

  // The store and the load are sequentially consistent, as are a sleeper's increment and its
  // check of the counter (wait_all): either this rank sees the sleeper and wakes it, or the
  // sleeper sees the new value and does not sleep.
  void signal(std::uint32_t v) noexcept {
    Counter& mine = counter_line(rank_);
    mine.value.store(v, std::memory_order_seq_cst);
#if defined(__linux__)
    if (mine.sleepers.load(std::memory_order_seq_cst) != 0)
      ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&mine.value), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
#endif
  }

  /// Waits until every rank's counter has reached `target` (compared as a signed difference, so
  /// that the counters may wrap: the ranks are never more than two calls apart).
  void wait_all(std::uint32_t target, std::chrono::steady_clock::time_point deadline, const Watch& w) {
    for (std::size_t r = 0; r < ranks_; ++r)
      if (r != rank_) wait_for(r, target, deadline, w);
  }

  /// Waits until local rank r's counter has reached `target`.
  void wait_for(std::size_t r, std::uint32_t target, std::chrono::steady_clock::time_point deadline, const Watch& w) {
    auto& a = counter(r);
    const auto waiting_since = std::chrono::steady_clock::now();
    const auto spin_until = waiting_since + spin_time;
    for (unsigned spin = 0; !reached(a.load(std::memory_order_acquire), target); ++spin) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      if (spin % 64 == 63) {
        if (std::chrono::steady_clock::now() > spin_until) break;
        std::this_thread::yield();
      }
    }
    for (std::uint32_t seen = a.load(std::memory_order_acquire); !reached(seen, target);
         seen = a.load(std::memory_order_acquire)) {
#if defined(__linux__)
      auto& sleepers = counter_line(r).sleepers;
      sleepers.fetch_add(1, std::memory_order_seq_cst);
      seen = a.load(std::memory_order_seq_cst);
      if (!reached(seen, target)) {
        timespec slice{0, 10'000'000};
        ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&a), FUTEX_WAIT, seen, &slice, nullptr, 0);
      }
      sleepers.fetch_sub(1, std::memory_order_seq_cst);
#else
      std::this_thread::sleep_for(std::chrono::microseconds(100));
#endif
      if (reached(a.load(std::memory_order_acquire), target)) break;
      if (const auto gone = w.lost_peer())
        throw PeerLostError(w.who() + ": " + w.peer_name(*gone) +
                                " closed its connection during a shared-memory allreduce (its process ended)",
                            *gone);
      if (w.check_alive) w.check_alive(r, waiting_since);
      if (std::chrono::steady_clock::now() > deadline)
        throw TransportError(w.who() + ": shared-memory allreduce timed out after " + std::to_string(w.timeout.count()) +
                             " ms waiting for " + w.peer_name(r));
    }
  }

  // How long a wait spins before it sleeps. A sleeper must be woken and scheduled again (on a
  // virtual machine its idle virtual CPU must be resumed by the host), and a late wake-up makes the
  // peer wait in turn. On the 2-core machine a spin of 100 pause instructions trained fewer
  // samples a second than spins of 3000 pauses, 200 us or 1 ms, which were alike. The spin yields the core every 64 pauses, so that a thread of this rank that has work (the one
  // computing backward while this one waits for a bucket) is not kept from it.
  static constexpr std::chrono::microseconds spin_time{200};

  // Two ranks sum in pieces of at most this many bytes (docs/benchmarks.md, "Shared-memory
  // allreduce"): the one-wait sum of pieces of 256, 384 or 512 KiB is well ahead of a two-wait
  // split sum in pieces of 1 MiB from 1 to 64 MiB. But a one-wait call of 1 MiB was far slower than one of 1 MiB less
  // 64 bytes: a step that two processes running just the copy, the wait and
  // the addition reproduce. It sits where glibc 2.36's memcpy (the copy that publishes the values)
  // stops using `rep movsb` on AMD processors: at the L2 cache's size, 1 MiB there and 512 KiB
  // on earlier models. The step's mechanism was not isolated; pieces stay below 512 KiB.
  static constexpr std::size_t pair_piece_max_bytes = std::size_t{384} << 10;

  // More than two ranks: up to this many bytes a call copies the whole buffer into its slot (and
  // adds the others' chunk into the slot, then copies the sum back); above it, only the chunks
  // other ranks read, forming its own chunk from its values in one pass. Measured with two ranks
  // taking this path on the 2-core machine, whole against split: the whole copy ahead up to
  // 256 KiB, the split one from 384 KiB (docs/benchmarks.md, "Shared-memory allreduce").
  static constexpr std::size_t whole_copy_max_bytes = std::size_t{256} << 10;

  static bool reached(std::uint32_t counter, std::uint32_t target) noexcept {
    return static_cast<std::int32_t>(counter - target) >= 0;
  }

  std::size_t rank_, ranks_, capacity_, bytes_ = 0;
  std::byte* base_ = nullptr;
  std::uint64_t calls_ = 0;
};

}  // namespace flotilla::transport::tcp::detail
#endif  // FLOTILLA_TRANSPORT_TCP_SHAREDMEMORY_HPP_INCLUDED
