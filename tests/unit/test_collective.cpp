// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Collectives over the in-process transport: ring allreduce (exactness for every rank count and
// awkward sizes, averaging, lossy codecs within their documented error bound, bytes on the wire
// equal to the theory), broadcast from every root, the small allreduce of metrics, and failures.
#include <doctest/doctest.h>

#include <atomic>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "flotilla/codec/bf16.hpp"
#include "flotilla/codec/fp16.hpp"
#include "flotilla/codec/fp32.hpp"
#include "flotilla/collective/allreduce_small.hpp"
#include "flotilla/collective/broadcast.hpp"
#include "flotilla/collective/ring_allreduce.hpp"
#include "flotilla/collective/detail/serial_worker.hpp"
#include "flotilla/transport/in_process.hpp"

namespace unit_collective {

using namespace flotilla;
using transport::InProcess;

namespace {

/// Integer-valued inputs: every partial sum is exact in float (and in fp16: |sums| <= 800), so
/// any summation order gives the sequential sum bit for bit.
float input_value(std::size_t rank, std::size_t i) {
  return static_cast<float>(static_cast<int>((rank * 37 + i * 11 + (i >> 7)) % 201) - 100);
}

/// Lossless, but not codec::Raw: exercises the encode/decode path (the ring sends Raw values
/// straight from the buffer).
struct CopyCodec {
  static constexpr std::string_view name = "copy";
  static constexpr bool lossless = true;
  static constexpr std::size_t encoded_size(std::size_t n) noexcept { return 4 * n; }
  static void encode(std::span<const float> v, std::span<std::byte> b) { codec::Fp32::encode(v, b); }
  static void decode(std::span<const std::byte> b, std::span<float> v) { codec::Fp32::decode(b, v); }
  static void decode_add(std::span<const std::byte> b, std::span<float> v) { codec::Fp32::decode_add(b, v); }
};

/// What the theory says rank r sends in one ring allreduce of p values over n ranks: every chunk
/// but r+1 in the reduce-scatter and every chunk but r+2 in the allgather (chunk sizes differ by
/// at most one, the larger first).
std::uint64_t theory_values_sent(std::size_t p, std::size_t n, std::size_t r) {
  if (n == 1) return 0;
  auto chunk = [&](std::size_t c) { return p / n + (c < p % n ? 1 : 0); };
  std::uint64_t total = 0;
  for (std::size_t c = 0; c < n; ++c) total += chunk(c) * ((c != (r + 1) % n ? 1 : 0) + (c != (r + 2) % n ? 1 : 0));
  return total;
}

struct RankResult {
  std::vector<float> values;
  TrafficCounters traffic;
};

template <class C>
std::vector<RankResult> run_allreduce(std::size_t n, std::size_t p, const collective::RingOptions& o,
                                      float (*value)(std::size_t, std::size_t) = input_value) {
  std::vector<RankResult> results(n);
  InProcess::run({}, n, [&](InProcess::endpoint& e) {
    std::vector<float> data(p);
    for (std::size_t i = 0; i < p; ++i) data[i] = value(e.rank(), i);
    const TrafficCounters before = e.counters();
    collective::ring_allreduce<C>(e, std::span<float>(data), o);
    results[e.rank()] = {std::move(data), e.counters() - before};
  });
  return results;
}

std::vector<float> sequential_sum(std::size_t n, std::size_t p, float (*value)(std::size_t, std::size_t) = input_value) {
  std::vector<float> sum(p, 0.f);
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t i = 0; i < p; ++i) sum[i] += value(r, i);
  return sum;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace

TEST_CASE("ring allreduce: exact sums for 1 to 8 ranks and every awkward size; bytes sent equal the theory") {
  for (std::size_t n = 1; n <= 8; ++n) {
    for (std::size_t p : {std::size_t{0}, std::size_t{1}, n - 1, n, n + 1, std::size_t{1000}, std::size_t{1000003}}) {
      CAPTURE(n);
      CAPTURE(p);
      collective::RingOptions ring;
      ring.algorithm = collective::AllreduceAlgorithm::ring;
      const auto results = run_allreduce<codec::Fp32>(n, p, ring);
      const auto expected = sequential_sum(n, p);
      std::uint64_t total_sent = 0;
      for (std::size_t r = 0; r < n; ++r) {
        CAPTURE(r);
        CHECK(bitwise_equal(results[r].values, expected));
        CHECK(results[r].traffic.payload_bytes_sent == theory_values_sent(p, n, r) * sizeof(float));
        // A rank receives what its left neighbour sends.
        CHECK(results[r].traffic.payload_bytes_received == theory_values_sent(p, n, (r + n - 1) % n) * sizeof(float));
        if (p % n == 0) CHECK(results[r].traffic.payload_bytes_sent * n == 2 * (n - 1) * p * sizeof(float));
        total_sent += results[r].traffic.payload_bytes_sent;
      }
      CHECK(total_sent == 2 * (n - 1) * p * sizeof(float));
    }
  }
}

TEST_CASE("ring allreduce: many segments, with and without the helper thread, and through a codec") {
  // The lossless codec cycles through RingOptions::receive_slots buffers (4 by default); the loop
  // below also runs it with one (each segment waits for the one before to be added) and with one
  // per segment.
  for (std::size_t n : {2, 3, 5, 8}) {
    for (std::size_t p : {n - 1, n + 1, std::size_t{1000}, std::size_t{4099}}) {
      for (std::size_t segment_bytes : {1, 12, 100, 4096}) {
        if (segment_bytes == 1 && p > 1000) continue;  // thousands of one-value messages: slow, no news
        for (bool pipeline : {true, false}) {
          CAPTURE(n);
          CAPTURE(p);
          CAPTURE(segment_bytes);
          CAPTURE(pipeline);
          collective::RingOptions o;
          o.algorithm = collective::AllreduceAlgorithm::ring;
          o.segment_bytes = segment_bytes;
          o.pipeline = pipeline;
          const auto expected = sequential_sum(n, p);
          const auto direct = run_allreduce<codec::Fp32>(n, p, o);
          const auto copied = run_allreduce<CopyCodec>(n, p, o);
          const auto half = run_allreduce<codec::Fp16>(n, p, o);  // small integers: exact in fp16
          o.receive_slots = 1;
          const auto one_slot = run_allreduce<codec::Fp32>(n, p, o);
          o.receive_slots = 0;
          const auto slot_per_segment = run_allreduce<codec::Fp32>(n, p, o);
          for (std::size_t r = 0; r < n; ++r) {
            CHECK(bitwise_equal(direct[r].values, expected));
            CHECK(bitwise_equal(one_slot[r].values, expected));
            CHECK(bitwise_equal(slot_per_segment[r].values, expected));
            CHECK(bitwise_equal(copied[r].values, expected));
            CHECK(bitwise_equal(half[r].values, expected));
            CHECK(copied[r].traffic.payload_bytes_sent == direct[r].traffic.payload_bytes_sent);
            CHECK(half[r].traffic.payload_bytes_sent * 2 == direct[r].traffic.payload_bytes_sent);
          }
        }
      }
    }
  }
}

TEST_CASE("SerialWorker: items run once each, in order, one at a time, on the helper or on a waiting caller") {
  struct Log {
    std::vector<std::size_t> order;
    std::atomic<int> in_flight{0}, max_in_flight{0};
    std::atomic<std::size_t> finished{0};
    std::size_t on_caller = 0, on_helper = 0;
    std::thread::id caller;
    std::size_t fail_at = static_cast<std::size_t>(-1);
  } log;
  log.caller = std::this_thread::get_id();
  const detail::SerialWorker::Job job = [](void* context, std::size_t item) {
    auto& l = *static_cast<Log*>(context);
    const int now = ++l.in_flight;
    l.max_in_flight = std::max(l.max_in_flight.load(), now);
    l.order.push_back(item);  // only one item at a time touches these (checked by max_in_flight)
    (std::this_thread::get_id() == l.caller ? l.on_caller : l.on_helper) += 1;
    --l.in_flight;
    ++l.finished;
    if (item == l.fail_at) throw std::runtime_error("item failed");
  };
  detail::SerialWorker worker;
  // As the ring uses it: post one item at a time, now and then wait for an earlier one.
  for (std::size_t pass = 0; pass < 500; ++pass) {
    CAPTURE(pass);
    log.order.clear();
    log.finished = 0;
    worker.begin(job, &log);
    const std::size_t items = 1 + pass % 17;
    for (std::size_t i = 1; i <= items; ++i) {
      worker.post(i);
      if (i % 3 == 0) {
        worker.wait(i - 2);
        CHECK(log.finished >= i - 2);
      }
    }
    worker.wait(items);
    std::vector<std::size_t> expected(items);
    for (std::size_t i = 0; i < items; ++i) expected[i] = i;
    CHECK(log.order == expected);
  }
  CHECK(log.max_in_flight == 1);
  CHECK(log.on_caller + log.on_helper == 500 / 17 * (17 * 18 / 2) + (500 % 17) * (500 % 17 + 1) / 2);
  MESSAGE("items run by the waiting caller: " << log.on_caller << ", by the helper: " << log.on_helper);

  // A failure is rethrown by wait(); the items after it only count as done; the worker is usable
  // again in the next call.
  log.order.clear();
  log.fail_at = 3;
  worker.begin(job, &log);
  worker.post(8);
  CHECK_THROWS_WITH(worker.wait(8), "item failed");
  CHECK(log.order == std::vector<std::size_t>{0, 1, 2, 3});
  log.order.clear();
  log.fail_at = static_cast<std::size_t>(-1);
  worker.begin(job, &log);
  worker.post(2);
  worker.wait(2);
  CHECK(log.order == std::vector<std::size_t>{0, 1});
}

TEST_CASE("ring allreduce: 16-bit codecs send exactly half the bytes") {
  for (std::size_t n : {2, 4, 7}) {
    const std::size_t p = 1000003;
    const auto full = run_allreduce<codec::Fp32>(n, p, {});
    const auto half = run_allreduce<codec::Fp16>(n, p, {});
    const auto bf = run_allreduce<codec::Bf16>(n, p, {});
    std::uint64_t total = 0;
    for (std::size_t r = 0; r < n; ++r) {
      CHECK(half[r].traffic.payload_bytes_sent * 2 == full[r].traffic.payload_bytes_sent);
      CHECK(bf[r].traffic.payload_bytes_sent == half[r].traffic.payload_bytes_sent);
      CHECK(half[r].traffic.payload_bytes_sent == theory_values_sent(p, n, r) * 2);
      total += half[r].traffic.payload_bytes_sent;
    }
    CHECK(total == 2 * (n - 1) * p * 2);
  }
}

TEST_CASE("ring allreduce: averaging and prescaling") {
  for (std::size_t n : {1, 2, 3, 4, 8}) {
    const std::size_t p = 5003;
    const auto sum = sequential_sum(n, p);
    std::vector<float> mean(p);
    for (std::size_t i = 0; i < p; ++i) mean[i] = sum[i] / static_cast<float>(n);
    collective::RingOptions o;
    o.segment_bytes = 1024;
    o.average = true;
    for (const auto& r : run_allreduce<codec::Fp32>(n, p, o)) CHECK(bitwise_equal(r.values, mean));
    for (const auto& r : run_allreduce<CopyCodec>(n, p, o)) CHECK(bitwise_equal(r.values, mean));
    if ((n & (n - 1)) == 0) {  // dividing by a power of two is exact, so prescaling changes nothing
      o.prescale = true;
      for (const auto& r : run_allreduce<codec::Fp32>(n, p, o)) CHECK(bitwise_equal(r.values, mean));
      o.average = false;
      for (const auto& r : run_allreduce<codec::Fp32>(n, p, o)) CHECK(bitwise_equal(r.values, sum));
    }
  }
  // Integers cannot be averaged.
  CHECK_THROWS_AS(InProcess::run({}, 2,
                                 [](InProcess::endpoint& e) {
                                   std::vector<std::uint64_t> v(4, 1);
                                   collective::RingOptions o;
                                   o.average = true;
                                   collective::ring_allreduce(e, std::span<std::uint64_t>(v), o);
                                 }),
                  ConfigError);
}

TEST_CASE("ring allreduce: double and integer buffers; Fp32 given doubles sends doubles") {
  InProcess::run({}, 5, [](InProcess::endpoint& e) {
    std::vector<double> d(777);
    std::vector<std::uint64_t> u(777);
    for (std::size_t i = 0; i < d.size(); ++i) {
      d[i] = static_cast<double>(i) * 0.5 + static_cast<double>(e.rank());
      u[i] = (std::uint64_t{1} << 40) * e.rank() + i;
    }
    const auto before = e.counters().payload_bytes_sent;
    collective::ring_allreduce<codec::Fp32>(e, std::span<double>(d));  // the lossless codec follows the values
    if (e.counters().payload_bytes_sent - before != theory_values_sent(777, 5, e.rank()) * sizeof(double))
      throw std::runtime_error("doubles did not go on the wire as doubles");
    collective::ring_allreduce(e, std::span<std::uint64_t>(u));
    for (std::size_t i = 0; i < d.size(); ++i) {
      if (d[i] != static_cast<double>(i) * 2.5 + 10.0) throw std::runtime_error("double sum wrong at " + std::to_string(i));
      if (u[i] != (std::uint64_t{1} << 40) * 10 + 5 * i) throw std::runtime_error("integer sum wrong at " + std::to_string(i));
    }
  });
}

namespace {

float random_value(std::size_t rank, std::size_t i) {
  // Deterministic pseudo-random values of both signs with a spread of magnitudes (2^-20 to 2^3,
  // some below fp16's normal range), from a hash of (rank, i).
  std::uint64_t x = (rank * 0x9e3779b97f4a7c15ULL) ^ (i * 0xbf58476d1ce4e5b9ULL) ^ 0x94d049bb133111ebULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  const float uniform = static_cast<float>(x >> 40) * 0x1p-24f * 2.f - 1.f;  // in [-1, 1)
  return uniform * std::ldexp(1.f, static_cast<int>(i % 24) - 20);
}

/// The documented bound (docs/collectives.md): N encodings, each within u of the value it encodes
/// (a partial sum, at most sum |x|) plus half the format's smallest subnormal, and N-1 float
/// additions within 2^-24.
template <class C>
void check_lossy_bound(double u, double half_subnormal,
                       collective::AllreduceAlgorithm algorithm = collective::AllreduceAlgorithm::ring) {
  for (std::size_t n : {2, 3, 4, 8}) {
    if (algorithm == collective::AllreduceAlgorithm::recursive_doubling && n == 3) continue;
    const std::size_t p = 20011;
    collective::RingOptions o;
    o.algorithm = algorithm;
    o.segment_bytes = 8192;
    const auto results = run_allreduce<C>(n, p, o, random_value);
    std::size_t violations = 0, differ_between_ranks = 0;
    double worst_ratio = 0;
    for (std::size_t i = 0; i < p; ++i) {
      double exact = 0, abs_sum = 0;
      for (std::size_t r = 0; r < n; ++r) {
        exact += random_value(r, i);
        abs_sum += std::fabs(random_value(r, i));
      }
      // (1 + n u): the partial sums encoded may exceed sum |x| by the errors already made.
      const double bound = (n * u + n * 0x1p-24) * abs_sum * (1 + n * u) + n * half_subnormal;
      const double error = std::fabs(double(results[0].values[i]) - exact);
      violations += error > bound;
      worst_ratio = std::max(worst_ratio, error / bound);
      for (std::size_t r = 1; r < n; ++r) differ_between_ranks += std::memcmp(&results[r].values[i], &results[0].values[i], 4) != 0;
    }
    CAPTURE(n);
    CHECK(violations == 0);
    CHECK(differ_between_ranks == 0);
    MESSAGE(C::name << ", " << n << " ranks: worst error / bound = " << worst_ratio);
  }
}

}  // namespace

TEST_CASE("ring allreduce with 16-bit codecs: the documented error bound holds and every rank ends equal") {
  check_lossy_bound<codec::Fp16>(0x1p-11, 0x1p-25);
  check_lossy_bound<codec::Bf16>(0x1p-8, 0x1p-134);
  check_lossy_bound<codec::Bf16Truncate>(0x1p-7, 0x1p-133);
}

TEST_CASE("recursive doubling with 16-bit codecs: within the ring's bound (fewer roundings), every rank ends equal") {
  constexpr auto doubling = collective::AllreduceAlgorithm::recursive_doubling;
  check_lossy_bound<codec::Fp16>(0x1p-11, 0x1p-25, doubling);
  check_lossy_bound<codec::Bf16Truncate>(0x1p-7, 0x1p-133, doubling);
}

TEST_CASE("ring allreduce with fp16: prescaling keeps partial sums out of saturation") {
  const std::size_t n = 4, p = 1000;
  auto big = [](std::size_t, std::size_t i) { return 30000.f + static_cast<float>(i % 7); };
  collective::RingOptions o;
  o.average = true;
  const auto saturated = run_allreduce<codec::Fp16>(n, p, o, big);
  o.prescale = true;
  const auto scaled = run_allreduce<codec::Fp16>(n, p, o, big);
  for (std::size_t i = 0; i < p; ++i) {
    const double mean = 30000.0 + static_cast<double>(i % 7);
    // Without: the partial sums saturate at 65504 (the last rank adds its own 30000 in float
    // before dividing), and the mean is a fifth too small.
    CHECK(saturated[0].values[i] < 0.8 * mean);
    CHECK(std::fabs(scaled[0].values[i] - mean) <= mean * 4 * 0x1p-11);
  }
}

namespace {

/// The in-process endpoint's Transport members, for endpoints that add an ability to it.
struct Forwarding {
  InProcess::endpoint& e;
  std::size_t rank() const { return e.rank(); }
  std::size_t size() const { return e.size(); }
  void send(std::size_t p, Tag t, std::span<const std::byte> b) { e.send(p, t, b); }
  void recv(std::size_t p, Tag t, std::span<std::byte> b) { e.recv(p, t, b); }
  void sendrecv(std::size_t to, Tag t, std::span<const std::byte> o, std::size_t from, std::span<std::byte> i) {
    e.sendrecv(to, t, o, from, i);
  }
  std::size_t recv_any(Tag t, std::span<std::byte> b) { return e.recv_any(t, b); }
  void barrier() { e.barrier(); }
  TrafficCounters counters() const { return e.counters(); }
};

/// The in-process endpoint plus an allreduce of its own, counting its use.
struct NativeEndpoint : Forwarding {
  int native_calls = 0;
  void allreduce_sum(std::span<float> f) {
    ++native_calls;
    collective::RingOptions o;
    o.algorithm = collective::AllreduceAlgorithm::ring;
    collective::ring_allreduce(e, f, o);
  }
};
static_assert(NativeAllreduce<NativeEndpoint>);

}  // namespace

TEST_CASE("ring allreduce uses the transport's own allreduce for lossless float, unless forced") {
  InProcess::run({}, 3, [](InProcess::endpoint& base) {
    NativeEndpoint e{base};
    std::vector<float> v(100, 1.f);
    collective::RingOptions o;
    o.average = true;
    collective::ring_allreduce(e, std::span<float>(v), o);  // native, then divided
    if (e.native_calls != 1 || v[0] != 1.f) throw std::runtime_error("native allreduce not used");
    collective::ring_allreduce<codec::Fp16>(e, std::span<float>(v));  // lossy: the ring
    o.average = false;
    o.algorithm = collective::AllreduceAlgorithm::ring;
    collective::ring_allreduce(e, std::span<float>(v), o);
    if (e.native_calls != 1 || v[0] != 9.f) throw std::runtime_error("the ring was not used");
  });
}

namespace {

/// The in-process endpoint as a job over hosts (HostHierarchy): `host_of[r]` is rank r's host; the
/// two steps inside a host go as messages to and from the host's lowest rank, in pieces of 64
/// bytes, so that a sum takes several.
struct HostsEndpoint : Forwarding {
  std::vector<std::size_t> host_of;
  std::vector<std::size_t> leaders;
  int pieces = 0;
  static constexpr Tag inside = 900;
  std::span<const std::size_t> host_leaders() const { return leaders; }
  std::size_t host_piece_bytes() const { return 64; }
  std::size_t leader() const {
    std::size_t l = rank();
    for (std::size_t r = 0; r < size(); ++r)
      if (host_of[r] == host_of[rank()]) l = std::min(l, r);
    return l;
  }
  void reduce_to_host_leader(std::span<float> f) {
    if (f.size_bytes() > host_piece_bytes()) throw std::runtime_error("a piece larger than host_piece_bytes()");
    ++pieces;
    if (leader() != rank()) return e.send(leader(), inside, std::as_bytes(f));
    std::vector<float> other(f.size());
    for (std::size_t r = rank() + 1; r < size(); ++r) {
      if (host_of[r] != host_of[rank()]) continue;
      e.recv(r, inside, std::as_writable_bytes(std::span<float>(other)));
      for (std::size_t i = 0; i < f.size(); ++i) f[i] += other[i];
    }
  }
  void broadcast_from_host_leader(std::span<float> f) {
    if (leader() != rank()) return e.recv(leader(), inside, std::as_writable_bytes(f));
    for (std::size_t r = rank() + 1; r < size(); ++r)
      if (host_of[r] == host_of[rank()]) e.send(r, inside, std::as_bytes(f));
  }
};
static_assert(HostHierarchy<HostsEndpoint>);

/// HostsEndpoint with an allreduce of its own, faster below 8 KiB (MPI's shape), counting its use.
struct HostsWithOwnSum : HostsEndpoint {
  int own_sums = 0;
  std::size_t hierarchical_min_bytes() const { return 8192; }
  void allreduce_sum(std::span<float> f) {
    ++own_sums;
    collective::RingOptions o;
    o.algorithm = collective::AllreduceAlgorithm::ring;
    collective::ring_allreduce(e, f, o);
  }
};
static_assert(HostHierarchy<HostsWithOwnSum> && NativeAllreduce<HostsWithOwnSum>);

}  // namespace

TEST_CASE("hierarchical allreduce: chosen across hosts; exact sums over uneven hosts, in pieces; refused on one host") {
  // Five ranks on three hosts, {0, 2}, {1, 4} and {3}: the leaders 0, 1 and 3 run the ring.
  const std::vector<std::size_t> host_of{0, 1, 0, 2, 1};
  InProcess::run({}, 5, [&](InProcess::endpoint& base) {
    HostsEndpoint e{{base}, host_of, {0, 1, 3}};
    std::size_t pieces = 0;
    for (std::size_t values : {0, 1, 7, 16, 17, 100, 1000}) {
      std::vector<float> v(values);
      for (std::size_t i = 0; i < values; ++i) v[i] = static_cast<float>(e.rank() * 100 + i);
      collective::RingOptions o;
      o.average = values == 100;  // the mean: divided once the sum is formed
      collective::ring_allreduce(e, std::span<float>(v), o);
      for (std::size_t i = 0; i < values; ++i) {
        const float sum = static_cast<float>(1000 + 5 * i);
        if (v[i] != (o.average ? sum / 5 : sum))
          throw std::runtime_error("wrong sum of " + std::to_string(values) + " values at " + std::to_string(i));
      }
      pieces += (values + 15) / 16;
    }
    if (e.pieces != static_cast<int>(pieces)) throw std::runtime_error("the hierarchical sum was not taken for every piece");
    // A job on one host has no hierarchy: asking for it names what it needs.
    HostsEndpoint one{{base}, {0, 0, 0, 0, 0}, {}};
    std::vector<float> v(10, 1.f);
    collective::RingOptions o;
    o.algorithm = collective::AllreduceAlgorithm::hierarchical;
    try {
      collective::ring_allreduce(one, std::span<float>(v), o);
      throw std::runtime_error("hierarchical on one host was not refused");
    } catch (const ConfigError& x) {
      if (std::string(x.what()).find("needs a job over several hosts") == std::string::npos) throw;
    }
    collective::ring_allreduce(one, std::span<float>(v));  // automatic: the ring
    if (v[0] != 5.f) throw std::runtime_error("the ring on one host gave a wrong sum");
    // A transport with a sum of its own keeps the sums below its hierarchical_min_bytes().
    HostsWithOwnSum own{{{base}, host_of, {0, 1, 3}}};
    std::vector<float> small(2047, 1.f), large(2048, 1.f);  // 8 KiB less 4 bytes, and 8 KiB
    collective::ring_allreduce(own, std::span<float>(small));
    collective::ring_allreduce(own, std::span<float>(large));
    if (own.own_sums != 1 || own.pieces != 128 || small[0] != 5.f || large[2047] != 5.f)
      throw std::runtime_error("the small sum was not the transport's own, or the large one not hierarchical");
  });
}

namespace {

/// NativeEndpoint with a size limit: MPI's shape (MpiOptions::native_allreduce_max_bytes).
struct BoundedNativeEndpoint : NativeEndpoint {
  std::size_t native_allreduce_max_bytes() const noexcept { return 4000; }
};
static_assert(BoundedNativeAllreduce<BoundedNativeEndpoint> && !BoundedNativeAllreduce<NativeEndpoint>);

}  // namespace

TEST_CASE("recursive doubling: exact sums for 1, 2, 4 and 8 ranks and awkward sizes; log2(N) messages of the whole buffer") {
  collective::RingOptions o;
  o.algorithm = collective::AllreduceAlgorithm::recursive_doubling;
  for (std::size_t n : {1, 2, 4, 8}) {
    const std::size_t rounds = static_cast<std::size_t>(std::countr_zero(n));
    for (std::size_t p : {std::size_t{0}, std::size_t{1}, n - 1, n + 1, std::size_t{1000}, std::size_t{100003}}) {
      CAPTURE(n);
      CAPTURE(p);
      const auto expected = sequential_sum(n, p);
      const auto direct = run_allreduce<codec::Fp32>(n, p, o);
      const auto copied = run_allreduce<CopyCodec>(n, p, o);
      const auto half = run_allreduce<codec::Fp16>(n, p, o);  // small integers: exact in fp16
      for (std::size_t r = 0; r < n; ++r) {
        CAPTURE(r);
        CHECK(bitwise_equal(direct[r].values, expected));
        CHECK(bitwise_equal(copied[r].values, expected));
        CHECK(bitwise_equal(half[r].values, expected));
        CHECK(direct[r].traffic.payload_bytes_sent == rounds * p * sizeof(float));
        CHECK(direct[r].traffic.payload_bytes_received == rounds * p * sizeof(float));
        CHECK(direct[r].traffic.messages_sent == (p == 0 ? 0 : rounds));
        CHECK(copied[r].traffic.payload_bytes_sent == direct[r].traffic.payload_bytes_sent);
        CHECK(half[r].traffic.payload_bytes_sent * 2 == direct[r].traffic.payload_bytes_sent);
      }
    }
  }
  // Averaging and prescaling around it, as around the ring.
  const std::size_t n = 4, p = 5003;
  const auto sum = sequential_sum(n, p);
  std::vector<float> mean(p);
  for (std::size_t i = 0; i < p; ++i) mean[i] = sum[i] / static_cast<float>(n);
  o.average = true;
  for (const auto& r : run_allreduce<codec::Fp32>(n, p, o)) CHECK(bitwise_equal(r.values, mean));
  o.prescale = true;
  for (const auto& r : run_allreduce<codec::Fp32>(n, p, o)) CHECK(bitwise_equal(r.values, mean));
  o.average = false;
  for (const auto& r : run_allreduce<codec::Fp32>(n, p, o)) CHECK(bitwise_equal(r.values, sum));
}

TEST_CASE("allreduce algorithm by size: two ranks swap up to pair_exchange_max_bytes, the ring beyond; 4 ranks opt in") {
  auto messages = [](std::size_t n, std::size_t p, const collective::RingOptions& o) {
    const auto results = run_allreduce<codec::Fp32>(n, p, o);
    const auto expected = sequential_sum(n, p);
    for (const auto& r : results) CHECK(bitwise_equal(r.values, expected));
    return results[0].traffic.messages_sent;
  };
  collective::RingOptions o;
  o.pair_exchange_max_bytes = 4000;
  CHECK(messages(2, 1000, o) == 1);  // 4000 bytes: one swap
  CHECK(messages(2, 1001, o) == 2);  // one value more: the ring's two steps (one segment each)
  CHECK(messages(4, 1000, o) == 6);  // more than two ranks: the ring unless asked
  o.doubling_max_bytes = 4000;
  CHECK(messages(4, 1000, o) == 2);
  CHECK(messages(4, 1001, o) == 6);
  CHECK(messages(3, 10, o) == 4);  // not a power of two: always the ring
  o.pair_exchange_max_bytes = 0;
  CHECK(messages(2, 2, o) == 2);
}

TEST_CASE("allreduce algorithm: an algorithm that cannot run here is refused, naming why") {
  collective::RingOptions o;
  o.algorithm = collective::AllreduceAlgorithm::recursive_doubling;
  CHECK_THROWS_WITH_AS(run_allreduce<codec::Fp32>(3, 10, o), doctest::Contains("power-of-two number of ranks, not 3"),
                       ConfigError);
  o.algorithm = collective::AllreduceAlgorithm::native;
  CHECK_THROWS_WITH_AS(run_allreduce<codec::Fp32>(2, 10, o), doctest::Contains("NativeAllreduce"), ConfigError);
}

TEST_CASE("a transport's own allreduce with a size limit: used up to it, flotilla's algorithms above") {
  InProcess::run({}, 2, [](InProcess::endpoint& base) {
    BoundedNativeEndpoint e{{base}};
    std::vector<float> v(1000, 1.f);  // 4000 bytes: at the limit
    collective::ring_allreduce(e, std::span<float>(v));
    if (e.native_calls != 1 || v[0] != 2.f) throw std::runtime_error("native allreduce not used at its limit");
    std::vector<float> w(1001, 1.f);
    const auto before = e.counters().messages_sent;
    collective::ring_allreduce(e, std::span<float>(w));  // above: two ranks swap
    if (e.native_calls != 1 || w[0] != 2.f || e.counters().messages_sent - before != 1)
      throw std::runtime_error("above the native limit, the pair swap was not used");
  });
}

TEST_CASE("collective tags: defaults in the reserved range, and calls with other tags leave each other alone") {
  namespace dt = collective::default_tags;
  static_assert(dt::ring_allreduce >= tags::reserved_begin && dt::broadcast >= tags::reserved_begin &&
                dt::allreduce_small >= tags::reserved_begin);
  // The MPI transport carries reserved tags up to reserved_begin + MPI_TAG_UB, at least 32767.
  static_assert(dt::ring_allreduce - tags::reserved_begin <= 32767 && dt::allreduce_small - tags::reserved_begin <= 32767);

  // Messages with another tag (a user's, another bucket's) waiting in a mailbox are left alone.
  InProcess::run({}, 3, [](InProcess::endpoint& e) {
    const std::size_t right = (e.rank() + 1) % 3, left = (e.rank() + 2) % 3;
    const std::byte marker[3] = {std::byte{1}, std::byte{2}, std::byte{3}};
    const Tag bucket_8 = tags::reserved_begin + 0x108;
    e.send(right, bucket_8, marker);
    e.send(right, 7, marker);
    std::vector<float> a(10, 1.f), b(3, 2.f);
    collective::RingOptions o;
    o.tag = tags::reserved_begin + 0x107;
    collective::ring_allreduce(e, std::span<float>(a), o);
    o.tag = tags::reserved_begin + 0x109;
    collective::ring_allreduce(e, std::span<float>(b), o);
    collective::ring_allreduce(e, std::span<float>(b), o);  // consecutive calls may share a tag
    std::byte got[3]{};
    e.recv(left, bucket_8, got);
    e.recv(left, 7, got);
    if (a[0] != 3.f || b[0] != 18.f || got[2] != std::byte{3}) throw std::runtime_error("messages mixed up");
  });
}

TEST_CASE("ring allreduce: mismatched sizes fail with a TransportError instead of hanging") {
  // Rank 1 has one value fewer, so some chunk sizes disagree; with the helper thread busy.
  collective::RingOptions o;
  o.segment_bytes = 4096;
  CHECK_THROWS_AS(InProcess::run({}, 3,
                                 [&](InProcess::endpoint& e) {
                                   std::vector<float> v(e.rank() == 1 ? 99999 : 100000, 1.f);
                                   collective::ring_allreduce(e, std::span<float>(v), o);
                                 }),
                  TransportError);
}

TEST_CASE("broadcast: every root, every rank count, sizes across segment boundaries") {
  for (std::size_t n = 1; n <= 6; ++n) {
    for (std::size_t root = 0; root < n; ++root) {
      for (std::size_t p : {0, 1, 1000, 300007}) {
        CAPTURE(n);
        CAPTURE(root);
        CAPTURE(p);
        collective::BroadcastOptions o;
        o.segment_bytes = p > 1000 ? 65536 : 24;
        o.tag = tags::reserved_begin + 0x200 + static_cast<Tag>(root);
        std::vector<std::vector<float>> results(n);
        std::vector<std::uint64_t> sent(n);
        InProcess::run({}, n, [&](InProcess::endpoint& e) {
          std::vector<float> v(p, -1.f);
          if (e.rank() == root)
            for (std::size_t i = 0; i < p; ++i) v[i] = static_cast<float>(i) * 0.25f + 1.f;
          collective::broadcast(e, std::span<float>(v), root, o);
          results[e.rank()] = std::move(v);
          sent[e.rank()] = e.counters().payload_bytes_sent;
        });
        std::uint64_t total = 0;
        for (std::size_t r = 0; r < n; ++r) {
          CHECK(bitwise_equal(results[r], results[root]));
          total += sent[r];
        }
        CHECK((p == 0 || results[root][p - 1] == static_cast<float>(p - 1) * 0.25f + 1.f));
        CHECK(total == (n - 1) * p * sizeof(float));  // each link of the chain carries it once
      }
    }
  }
  CHECK_THROWS_WITH_AS(InProcess::run({}, 2,
                                      [](InProcess::endpoint& e) {
                                        std::vector<double> v(3);
                                        collective::broadcast(e, std::span<double>(v), 2);
                                      }),
                       doctest::Contains("root 2, but the job has 2 ranks"), ConfigError);
}

TEST_CASE("allreduce_sum of metrics: doubles and counts, every rank gets the same") {
  for (std::size_t n = 1; n <= 9; ++n) {
    CAPTURE(n);
    std::vector<std::vector<double>> doubles(n);
    std::vector<std::vector<std::uint64_t>> counts(n);
    InProcess::run({}, n, [&](InProcess::endpoint& e) {
      std::vector<double> d = {0.5 * static_cast<double>(e.rank()), 1.0, -2.0 * static_cast<double>(e.rank())};
      std::vector<std::uint64_t> c = {e.rank() + 1, 1000};
      std::vector<double> none;
      collective::allreduce_sum(e, std::span<double>(d));
      collective::allreduce_sum(e, std::span<std::uint64_t>(c), tags::reserved_begin + 0x300);
      collective::allreduce_sum(e, std::span<double>(none));
      doubles[e.rank()] = d;
      counts[e.rank()] = c;
    });
    const double tri = static_cast<double>(n * (n - 1) / 2);
    for (std::size_t r = 0; r < n; ++r) {
      CHECK(doubles[r] == std::vector<double>{0.5 * tri, static_cast<double>(n), -2.0 * tri});
      CHECK(counts[r] == std::vector<std::uint64_t>{n * (n + 1) / 2, 1000 * n});
    }
  }
}

}  // namespace unit_collective
