// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_COLLECTIVE_RINGALLREDUCE_HPP_INCLUDED
#define FLOTILLA_COLLECTIVE_RINGALLREDUCE_HPP_INCLUDED
// Ring allreduce over any Transport: every rank ends with the element-wise sum (or mean) of all
// ranks' buffers. See docs/collectives.md for the algorithm, the bytes it moves and the error a
// lossy codec adds.
//
// The buffer is cut into N chunks (sizes differ by at most one value). In N-1 reduce-scatter
// steps each rank sends one chunk to its right neighbour and adds the chunk arriving from its
// left into its own copy, so that afterwards rank r holds the complete sum of chunk r+1; in N-1
// allgather steps the complete chunks travel once more round the ring. Each rank sends
// 2(N-1) chunks, 2(N-1)/N of the buffer: the least any allreduce can, whatever N.
//
// Each chunk moves in segments (options.segment_bytes). The calling thread does all the
// communication; a helper thread (detail::SerialWorker) decodes and adds each received segment
// and encodes the result for the next step, while the calling thread moves the next segment.
//
// With a lossy codec the partial sums are re-encoded at every hop (N encodings in all, N-1 of
// partial sums and one of the total), and the rank that completes a chunk keeps the decoded form
// of what it sends, so all ranks end with the same bits.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "flotilla/codec/fp32.hpp"
#include "flotilla/collective/hierarchical_allreduce.hpp"
#include "flotilla/collective/recursive_doubling.hpp"
#include "flotilla/collective/detail/scratch.hpp"
#include "flotilla/collective/detail/serial_worker.hpp"
#include "flotilla/collective/tags.hpp"
#include "flotilla/concepts/codec.hpp"
#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/transport/operation.hpp"

namespace flotilla::collective {

/// The ways ring_allreduce can form a sum (RingOptions::algorithm).
enum class AllreduceAlgorithm {
  automatic,           // by the number of ranks and bytes, see RingOptions
  ring,                // flotilla's ring: 2(N-1) steps of 1/N of the buffer, any N
  recursive_doubling,  // log2(N) swaps of the whole buffer; N a power of two
  native,              // the transport's own allreduce (NativeAllreduce); float, lossless codec
  hierarchical,        // each host through its shared memory, a ring of the hosts' leaders
                       // (HostHierarchy, a job over several hosts); float, lossless codec
};

struct RingOptions {
  /// Divide the sum by the number of ranks (floating-point values only).
  bool average = false;
  /// Divide each rank's values by the number of ranks before the reduction instead of dividing
  /// the sum after it, so that partial sums stay within the range of the values themselves: with
  /// a 16-bit codec, a sum that would saturate at 65504 does not. The result is the mean; without
  /// `average` every rank multiplies it back by N at the end (exact when N is a power of two).
  bool prescale = false;
  /// Bytes of values (before encoding) per message. Smaller segments overlap more of the
  /// arithmetic with the transfers, at a fixed cost per message; see docs/collectives.md.
  std::size_t segment_bytes = 256 * 1024;
  /// Reduce on a helper thread while the next segment is in flight (when a chunk has more than
  /// one segment). Off: the calling thread does everything, one segment after the other.
  bool pipeline = true;
  /// Receive buffers of one segment each that the reduce-scatter cycles through, with the lossless
  /// codec (0: one per segment of a chunk, as a lossy codec always has). A few keep the received
  /// bytes in cache until they are added; one per segment spreads them over half the buffer (32 MiB
  /// of a 64 MiB sum on two ranks). Measured on loopback TCP, two ranks:
  /// docs/benchmarks.md, "Ring allreduce: receive buffers and the helper thread".
  std::size_t receive_slots = 4;
  /// How the sum is formed; `automatic` picks by size (see choose_algorithm below and
  /// docs/collectives.md): the hierarchical sum where the transport sums hierarchically (a job
  /// over several hosts, HostHierarchy), the transport's own allreduce where it has one (up to its
  /// native_allreduce_max_bytes() when it gives one), recursive doubling for two ranks up to
  /// pair_exchange_max_bytes and for 4, 8, ... ranks up to doubling_max_bytes, the ring otherwise.
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::automatic;
  /// Two ranks: up to this many bytes of values, one swap of the whole buffer (recursive doubling)
  /// instead of the ring's two steps of half of it. Both send the same bytes; the swap waits for
  /// one message instead of two, the ring halves the additions and overlaps them with the
  /// transfers. On loopback TCP the swap wins up to 512 KiB and the ring from 1 MiB, on 2 cores and
  /// on 16 (docs/benchmarks.md, "Two ranks: one swap or the ring").
  std::size_t pair_exchange_max_bytes = std::size_t{512} << 10;
  /// Four, eight, ... ranks: up to this many bytes, recursive doubling, which sends log2(N) times
  /// the buffer where the ring sends 2(N-1)/N of it, in log2(N) messages instead of 2(N-1). Off
  /// by default (0), as the trainer's traffic counters assume the ring's bytes; up to 64 KiB is
  /// where it beat the ring with 4 and 8 ranks (docs/benchmarks.md, "16 cores").
  std::size_t doubling_max_bytes = 0;
  /// The tag of this call's messages. Allreduces that may be in flight at the same time on the
  /// same endpoints (one per gradient bucket) need distinct tags; consecutive ones may share one.
  Tag tag = default_tags::ring_allreduce;
};

}  // namespace flotilla::collective

namespace flotilla::detail {

/// `total` values in `parts` contiguous parts whose sizes differ by at most one (larger first).
struct Partition {
  std::size_t total = 0;
  std::size_t parts = 1;
  std::size_t size(std::size_t i) const noexcept { return total / parts + (i < total % parts ? 1 : 0); }
  std::size_t offset(std::size_t i) const noexcept { return i * (total / parts) + std::min(i, total % parts); }
};

template <class C, class E, class T>
class RingAllreduce {
  // Raw values on a little-endian host are their own encoding: send straight from the buffer and
  // receive the allgather straight into it; only the reduce-scatter needs receive buffers.
  static constexpr bool direct = std::is_same_v<C, codec::Raw<T>> && std::endian::native == std::endian::little;

 public:
  RingAllreduce(E& e, std::span<T> data, const collective::RingOptions& o)
      : e_(e), data_(data), o_(o), n_(e.size()), rank_(e.rank()), chunks_{data.size(), e.size()} {
    const std::size_t max_chunk = chunks_.size(0);
    const std::size_t per_segment = std::max<std::size_t>(1, o.segment_bytes / sizeof(T));
    segments_ = std::max<std::size_t>(1, (max_chunk + per_segment - 1) / per_segment);
    // Segment lengths are floor or ceil of (chunk length / segments), chunk lengths one of two.
    const std::size_t shortest = chunks_.size(n_ - 1) / segments_, longest = (max_chunk + segments_ - 1) / segments_;
    slot_bytes_ = std::max(C::encoded_size(shortest), C::encoded_size(longest));
    // Raw values need receive buffers only for the reduce-scatter, and a segment's buffer is free
    // again once its sum is formed: cycling through a few keeps them in cache. An encoded segment
    // waits in its buffer from one step to the next, so a lossy codec keeps one per segment.
    slots_ = direct && o.receive_slots > 0 ? std::min(segments_, o.receive_slots) : segments_;
    tag_ = o.tag;
  }

  void run() {
    const std::size_t steps = 2 * (n_ - 1);
    auto& buffers = collective_buffers();
    const std::size_t sets = direct ? 1 : 2;
    if (buffers.size() < sets * slots_ * slot_bytes_) buffers.resize(sets * slots_ * slot_bytes_);
    a_ = buffers.data();
    b_ = direct ? buffers.data() : buffers.data() + slots_ * slot_bytes_;
    items_.clear();
    items_.reserve(segments_ * (steps + 1));
    // Item counts to wait for: before sending segment k again (its sum must be complete), and
    // before receiving into slot s again (the item reading it must be done).
    std::vector<std::size_t> ready(segments_, 0), slot_ready(slots_, 0);

    SerialWorker* worker = o_.pipeline && segments_ > 1 ? &collective_worker() : nullptr;
    if (worker) worker->begin(&RingAllreduce::run_item, this);
    // However this call ends, the helper must be done with the buffers before they go away.
    struct Drain {
      SerialWorker* w;
      const std::vector<Item>& items;
      ~Drain() {
        if (!w) return;
        try {
          w->wait(items.size());
        } catch (...) {  // the exception already unwinding is the one to report
        }
      }
    } drain{worker, items_};

    auto post = [&](Item it) {
      items_.push_back(it);
      if (worker)
        worker->post(items_.size());
      else
        run_item(this, items_.size() - 1);
      return items_.size();
    };

    if constexpr (!direct)
      for (std::size_t k = 0; k < segments_; ++k) ready[k] = post({prologue, k});

    for (std::size_t t = 0; t < steps; ++t) {
      const std::size_t send_chunk = chunk_sent(t), recv_chunk = chunk_received(t);
      for (std::size_t k = 0; k < segments_; ++k) {
        // The allgather of raw values receives straight into the buffer, not into a slot.
        const std::size_t s = k % slots_;
        const bool into_slot = !direct || t < n_ - 1;
        if (const std::size_t before = into_slot ? std::max(ready[k], slot_ready[s]) : ready[k]; worker && before != 0)
          worker->wait(before);
        const std::size_t send_len = segment_length(send_chunk, k), recv_len = segment_length(recv_chunk, k);
        std::span<const std::byte> out;
        std::span<std::byte> in;
        if constexpr (direct) {
          out = std::as_bytes(segment(send_chunk, k));
          in = t < n_ - 1 ? std::span<std::byte>(slot(b_, k), recv_len * sizeof(T)) : std::as_writable_bytes(segment(recv_chunk, k));
        } else {
          // Reduce-scatter: send from A, receive into B. Allgather: alternate, so that what arrived
          // in one step is forwarded, as it is, in the next while the next arrives.
          const bool flip = t >= n_ - 1 && (t - (n_ - 1)) % 2 == 1;
          out = std::span<const std::byte>(slot(flip ? b_ : a_, k), C::encoded_size(send_len));
          in = std::span<std::byte>(slot(flip ? a_ : b_, k), C::encoded_size(recv_len));
        }
        exchange(out, send_len != 0, in, recv_len != 0);
        if (into_slot) ready[k] = slot_ready[s] = post({t, k});
      }
    }
    if (worker) worker->wait(items_.size());
  }

 private:
  static constexpr std::size_t prologue = static_cast<std::size_t>(-1);
  struct Item {
    std::size_t step;
    std::size_t segment;
  };

  std::size_t chunk_sent(std::size_t t) const noexcept {
    return t < n_ - 1 ? (rank_ + n_ - t) % n_ : (rank_ + 1 + n_ - (t - (n_ - 1))) % n_;
  }
  std::size_t chunk_received(std::size_t t) const noexcept {
    return t < n_ - 1 ? (rank_ + 2 * n_ - t - 1) % n_ : (rank_ + n_ - (t - (n_ - 1))) % n_;
  }
  std::size_t segment_length(std::size_t chunk, std::size_t k) const noexcept {
    return Partition{chunks_.size(chunk), segments_}.size(k);
  }
  std::span<T> segment(std::size_t chunk, std::size_t k) const noexcept {
    const Partition p{chunks_.size(chunk), segments_};
    return data_.subspan(chunks_.offset(chunk) + p.offset(k), p.size(k));
  }
  std::byte* slot(std::byte* set, std::size_t k) const noexcept { return set + (k % slots_) * slot_bytes_; }

  void exchange(std::span<const std::byte> out, bool send, std::span<std::byte> in, bool receive) {
    const std::size_t right = (rank_ + 1) % n_, left = (rank_ + n_ - 1) % n_;
    // Both sides know every segment's length, so empty segments (fewer values than ranks) are not
    // sent at all. Send and receive counts then differ by one at most, and a lone send or receive
    // pairs with the neighbour's, in the same order, so this cannot deadlock.
    if (send && receive)
      e_.sendrecv(right, tag_, out, left, in);
    else if (send)
      e_.send(right, tag_, out);
    else if (receive)
      e_.recv(left, tag_, in);
  }

  static void run_item(void* context, std::size_t index) {
    auto& self = *static_cast<RingAllreduce*>(context);
    self.work(self.items_[index]);
  }

  /// The arithmetic of one segment, after its message arrived (or before the first send).
  void work(const Item& it) {
    const std::size_t k = it.segment;
    if (it.step == prologue) {  // encode this rank's own chunk for the first send
      const auto own = segment(rank_, k);
      if (!own.empty()) C::encode(std::span<const T>(own), std::span<std::byte>(slot(a_, k), C::encoded_size(own.size())));
      return;
    }
    const std::size_t t = it.step;
    const auto values = segment(chunk_received(t), k);
    if (values.empty()) return;
    const std::size_t bytes = C::encoded_size(values.size());
    if (t >= n_ - 1) {  // allgather (not direct): decode what arrived
      const bool flip = (t - (n_ - 1)) % 2 == 1;
      C::decode(std::span<const std::byte>(slot(flip ? a_ : b_, k), bytes), values);
      return;
    }
    C::decode_add(std::span<const std::byte>(slot(b_, k), bytes), values);
    if (t == n_ - 2) {  // this rank now holds the complete sum of this chunk
      if constexpr (std::is_floating_point_v<T>)
        if (o_.average && !o_.prescale)
          for (auto& v : values) v /= static_cast<T>(n_);
    }
    if constexpr (!direct) {
      const std::span<std::byte> out(slot(a_, k), bytes);
      C::encode(std::span<const T>(values), out);
      // The other ranks get decode(encode(sum)); keep the same, so that every rank ends equal.
      if (t == n_ - 2 && !C::lossless) C::decode(std::span<const std::byte>(out), values);
    }
  }

  E& e_;
  std::span<T> data_;
  const collective::RingOptions& o_;
  std::size_t n_, rank_;
  Partition chunks_;
  std::size_t segments_ = 1, slot_bytes_ = 0, slots_ = 1;
  Tag tag_ = 0;
  std::byte* a_ = nullptr;
  std::byte* b_ = nullptr;
  std::vector<Item> items_;
};

template <class T>
void scale_all(std::span<T> data, T factor, bool divide) {
  if (divide)
    for (auto& v : data) v /= factor;
  else
    for (auto& v : data) v *= factor;
}

}  // namespace flotilla::detail

namespace flotilla::detail {

/// Which algorithm ring_allreduce runs for `values` values of T sent as Wire on e (see RingOptions).
/// Every rank decides alike: the inputs are the same on all of them.
template <class Wire, class T, class E>
collective::AllreduceAlgorithm choose_algorithm(const E& e, std::size_t values, const collective::RingOptions& o) {
  using A = collective::AllreduceAlgorithm;
  constexpr bool native_possible = NativeAllreduce<E> && std::is_same_v<T, float> && std::is_same_v<Wire, codec::Fp32>;
  constexpr bool hierarchy_possible = HostHierarchy<E> && std::is_same_v<T, float> && std::is_same_v<Wire, codec::Fp32>;
  const auto across_hosts = [&] {
    if constexpr (hierarchy_possible)
      return e.host_leaders().size() > 1;
    else
      return false;
  };
  const std::size_t n = e.size();
  switch (o.algorithm) {
    case A::ring:
      return A::ring;
    case A::hierarchical:
      if (!across_hosts())
        throw ConfigError(
            "ring_allreduce: AllreduceAlgorithm::hierarchical needs a job over several hosts on a transport that sums "
            "through each host's shared memory (HostHierarchy: TCP with shared memory on), float values and the "
            "lossless codec");
      return A::hierarchical;
    case A::native:
      if (!native_possible)
        throw ConfigError(
            "ring_allreduce: AllreduceAlgorithm::native needs a transport with an allreduce of its own "
            "(NativeAllreduce), float values and the lossless codec");
      return A::native;
    case A::recursive_doubling:
      if (!std::has_single_bit(n))
        throw ConfigError("ring_allreduce: AllreduceAlgorithm::recursive_doubling needs a power-of-two number of ranks, not " +
                          std::to_string(n));
      return A::recursive_doubling;
    case A::automatic:
      break;
  }
  if (values == 0) return A::ring;  // sends nothing, whatever the transport
  const std::size_t bytes = values * sizeof(T);
  const bool native_fits = [&] {
    if constexpr (BoundedNativeAllreduce<E>)
      return native_possible && bytes <= e.native_allreduce_max_bytes();
    else
      return native_possible;
  }();
  if (across_hosts()) {
    // Below the transport's own threshold (HostHierarchy's optional hierarchical_min_bytes), its
    // own allreduce: one collective's latency where the hierarchical sum has three.
    std::size_t below = 0;
    if constexpr (requires { e.hierarchical_min_bytes(); }) below = e.hierarchical_min_bytes();
    return native_fits && bytes < below ? A::native : A::hierarchical;
  }
  if (native_fits) return A::native;
  if (n >= 2 && std::has_single_bit(n) && bytes <= (n == 2 ? o.pair_exchange_max_bytes : o.doubling_max_bytes))
    return A::recursive_doubling;
  return A::ring;
}

}  // namespace flotilla::detail

namespace flotilla::collective {

/// Sums `data` element-wise over all ranks of `e` (or averages, see RingOptions), sending values
/// encoded with codec C: ring_allreduce<codec::Fp16>(endpoint, grads). The lossless codec follows
/// the values (codec::for_value_t: Fp32 given doubles sends doubles). Every rank must call it with
/// the same number of values, codec and options; every rank ends with the same bits. By default
/// the algorithm follows the size (RingOptions::algorithm): the ring for large buffers, recursive
/// doubling where latency dominates, the transport's own allreduce where it has one.
template <class C, Transport E, class T>
  requires Codec<codec::for_value_t<C, T>, T>
void ring_allreduce(E& e, std::span<T> data, const RingOptions& options = {}) {
  using Wire = codec::for_value_t<C, T>;
  const std::size_t n = e.size();
  if constexpr (!std::is_floating_point_v<T>) {
    if (options.average || options.prescale)
      throw ConfigError("ring_allreduce: average and prescale need floating-point values");
  }
  const AllreduceAlgorithm algorithm = detail::choose_algorithm<Wire, T>(e, data.size(), options);
  if constexpr (std::is_floating_point_v<T>)
    if (options.prescale && n > 1) detail::scale_all(data, static_cast<T>(n), true);
  if (n > 1) {
    if (algorithm == AllreduceAlgorithm::native) {
      if constexpr (NativeAllreduce<E> && std::is_same_v<T, float>) e.allreduce_sum(data);
    } else if (algorithm == AllreduceAlgorithm::hierarchical) {
      if constexpr (HostHierarchy<E> && std::is_same_v<T, float>) {
        transport::OperationScope<E> op(e, options.tag, transport::OpKind::ring_allreduce, data.size());
        RingOptions leaders = options;
        leaders.average = leaders.prescale = false;
        leaders.algorithm = AllreduceAlgorithm::ring;
        detail::hierarchical_allreduce(e, data, [&leaders](auto& group, std::span<float> part) {
          detail::RingAllreduce<codec::Fp32, std::remove_reference_t<decltype(group)>, float>(group, part, leaders).run();
        });
      }
    } else if (algorithm == AllreduceAlgorithm::recursive_doubling) {
      detail::recursive_doubling_allreduce<Wire>(e, data, options.tag);
    } else {
      transport::OperationScope<E> op(e, options.tag, transport::OpKind::ring_allreduce, data.size());
      detail::RingAllreduce<Wire, E, T>(e, data, options).run();
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    // The ring divides as it completes each chunk (before its last encoding); the others sum first.
    const bool divided = algorithm == AllreduceAlgorithm::ring;
    if (options.average && !options.prescale && n > 1 && !divided) detail::scale_all(data, static_cast<T>(n), true);
    if (options.prescale && !options.average && n > 1) detail::scale_all(data, static_cast<T>(n), false);
  }
}

/// The same with the lossless codec (codec::Raw<T>: codec::Fp32 for float).
template <Transport E, class T>
  requires std::is_arithmetic_v<T> && (!std::is_same_v<T, bool>)
void ring_allreduce(E& e, std::span<T> data, const RingOptions& options = {}) {
  ring_allreduce<codec::Raw<T>>(e, data, options);
}

}  // namespace flotilla::collective
#endif  // FLOTILLA_COLLECTIVE_RINGALLREDUCE_HPP_INCLUDED
