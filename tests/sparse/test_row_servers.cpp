// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Embedding tables on parameter servers (sparse/row_table.hpp, row_server.hpp, row_client.hpp):
// rows created on first touch from (seed, table, key) alone, synchronous steps summed in worker
// order, asynchronous and bounded-staleness serving, the bytes of a step against the formula,
// 16-bit codecs, the memory bound, shard checkpoints, and peers that announce too much. Every job
// runs in-process, workers and servers on threads.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "flotilla/codec/bf16.hpp"
#include "flotilla/codec/fp16.hpp"
#include "flotilla/codec/fp32.hpp"
#include "flotilla/optim/row_sgd.hpp"
#include "flotilla/sparse/row_client.hpp"
#include "flotilla/sparse/row_server.hpp"
#include "flotilla/sparse/row_table.hpp"
#include "flotilla/transport/in_process.hpp"

namespace sparse_rows_tests {

using namespace flotilla;
using sparse::RowClient;
using sparse::RowServer;
using sparse::TableSpec;
using transport::InProcess;

/// An Adagrad-like row optimizer with one accumulator per value: its state makes two applies of
/// g1 and g2 differ from one apply of g1 + g2, and gives checkpoints a state to carry.
struct TestAdagrad {
  static constexpr std::string_view name = "test-adagrad";
  float learning_rate = 0.25f;
  std::size_t state_size(std::size_t dim) const noexcept { return dim; }
  void init_state(std::span<const float>, std::span<float> state) const noexcept {
    std::fill(state.begin(), state.end(), 0.125f);
  }
  void apply(std::span<float> row, std::span<float> state, std::span<const float> g) const noexcept {
    for (std::size_t i = 0; i < row.size(); ++i) {
      state[i] += g[i] * g[i];
      row[i] -= learning_rate * g[i] / std::sqrt(state[i]);
    }
  }
};
static_assert(RowOptimizer<TestAdagrad>);

/// Rows of a table held by a set of servers, by key.
using Rows = std::map<std::uint64_t, std::vector<float>>;

template <class Codec>
Rows rows_of(const std::vector<std::unique_ptr<RowServer<Codec>>>& servers, std::size_t table) {
  Rows out;
  for (const auto& s : servers)
    s->table(table).for_each_row([&](std::uint64_t key, std::span<const float> v, std::span<const float>, std::uint64_t) {
      CHECK(out.count(key) == 0);  // a key lives on one server
      out[key] = std::vector<float>(v.begin(), v.end());
    });
  return out;
}

template <class Codec = codec::Fp32, class O = optim::RowSGD>
std::vector<std::unique_ptr<RowServer<Codec>>> make_servers(std::size_t S, const std::vector<TableSpec>& specs, O o = {},
                                                            sparse::RowServerOptions options = {}) {
  std::vector<std::unique_ptr<RowServer<Codec>>> servers;
  for (std::size_t s = 0; s < S; ++s) {
    servers.push_back(std::make_unique<RowServer<Codec>>(s, S, options));
    for (const auto& spec : specs) servers.back()->add_table(spec, o);
  }
  return servers;
}

transport::InProcessOptions quick() {
  transport::InProcessOptions o;
  o.timeout = std::chrono::seconds(20);  // a hang fails the test rather than stalling it
  return o;
}

/// Runs W workers (ranks 0..W-1, each calling `worker(rank, client, endpoint)` then done) against
/// `servers` (ranks W..W+S-1).
template <class Codec>
void run_job(std::vector<std::unique_ptr<RowServer<Codec>>>& servers, std::size_t W, std::vector<std::size_t> dims,
             bool aggregate, std::size_t staleness,
             const std::function<void(std::size_t, RowClient<Codec>&, InProcess::endpoint&)>& worker) {
  const std::size_t S = servers.size();
  InProcess::run(quick(), W + S, [&](InProcess::endpoint& e) {
    if (e.rank() >= W) {
      servers[e.rank() - W]->serve(e, W, aggregate, staleness);
      return;
    }
    RowClient<Codec> client(dims, W, S);
    worker(e.rank(), client, e);
    client.done(e);
  });
}

TableSpec spec(std::size_t dim, std::uint32_t id = 7, float scale = 0.5f) {
  return TableSpec{"clicks" + std::to_string(id), dim, scale, 1234, id, 0};
}

// ---- synchronous steps --------------------------------------------------------------------------

/// One occurrence of a key in a sample, with its gradient.
struct Occurrence {
  std::uint64_t key;
  std::vector<float> gradient;
};

/// A batch of `samples` samples over a small vocabulary (keys repeat within and across samples),
/// gradients either arbitrary floats or multiples of 2^-12 small enough that every sum is exact.
std::vector<std::vector<Occurrence>> make_batch(std::size_t step, std::size_t samples, std::size_t dim, bool exact) {
  std::vector<std::vector<Occurrence>> batch(samples);
  std::uint64_t x = 0x9e3779b97f4a7c15ULL * (step + 1);
  for (auto& sample : batch)
    for (int j = 0; j < 3; ++j) {
      Occurrence o{detail::splitmix64(x) % 13 + (j == 0 ? 1000000007ULL : 0), std::vector<float>(dim)};
      for (auto& g : o.gradient) {
        const auto r = static_cast<std::int64_t>(detail::splitmix64(x) % 201) - 100;
        g = exact ? static_cast<float>(r) * 0x1p-12f : static_cast<float>(r) * 0.01237f / 3.0f;
      }
      sample.push_back(std::move(o));
    }
  return batch;
}

/// The coalesced gradient of samples [begin, end): one entry per distinct key, summed in sample
/// order, scaled by 1 / global batch.
void coalesce(const std::vector<std::vector<Occurrence>>& batch, std::size_t begin, std::size_t end, std::size_t dim,
              std::vector<std::uint64_t>& keys, std::vector<float>& grads) {
  keys.clear();
  grads.clear();
  std::map<std::uint64_t, std::size_t> at;
  for (std::size_t s = begin; s < end; ++s)
    for (const auto& o : batch[s]) {
      auto [it, fresh] = at.emplace(o.key, keys.size());
      if (fresh) {
        keys.push_back(o.key);
        grads.resize(grads.size() + dim, 0.0f);
      }
      for (std::size_t i = 0; i < dim; ++i) grads[it->second * dim + i] += o.gradient[i];
    }
  const float scale = 1.0f / static_cast<float>(batch.size());
  for (auto& g : grads) g *= scale;
}

/// W workers, S servers, synchronous, `steps` steps of a batch of 8 samples split evenly; returns
/// the final rows, and checks that every worker pulls the same rows at every step.
Rows sync_run(std::size_t W, std::size_t S, std::size_t steps, bool exact) {
  constexpr std::size_t dim = 3, samples = 8;
  auto servers = make_servers(S, {spec(dim)}, optim::RowSGD{0.5});
  std::vector<std::vector<std::vector<float>>> pulled(W, std::vector<std::vector<float>>(steps));
  run_job<codec::Fp32>(servers, W, {dim}, true, 0, [&](std::size_t w, RowClient<codec::Fp32>& c, InProcess::endpoint& e) {
    std::vector<std::uint64_t> keys;
    std::vector<float> grads;
    for (std::size_t step = 0; step < steps; ++step) {
      const auto batch = make_batch(step, samples, dim, exact);
      // Every worker pulls the rows of the whole batch's keys (sorted) to compare what they see.
      coalesce(batch, 0, samples, dim, keys, grads);
      std::sort(keys.begin(), keys.end());
      pulled[w][step].resize(keys.size() * dim);
      c.pull(e, 0, step, keys, pulled[w][step]);
      coalesce(batch, w * samples / W, (w + 1) * samples / W, dim, keys, grads);
      c.push(e, 0, step, keys, grads);
    }
  });
  for (std::size_t w = 1; w < W; ++w)
    for (std::size_t step = 0; step < steps; ++step) CHECK(pulled[w][step] == pulled[0][step]);
  return rows_of(servers, 0);
}

TEST_CASE("synchronous steps of one worker apply the coalesced batch gradient once per row") {
  // The reference: a shard with no transport, given the same coalesced gradients.
  constexpr std::size_t dim = 3, samples = 8, steps = 3;
  sparse::RowShard<optim::RowSGD> reference(spec(dim), optim::RowSGD{0.5});
  std::vector<std::uint64_t> keys;
  std::vector<float> grads;
  for (std::size_t step = 0; step < steps; ++step) {
    coalesce(make_batch(step, samples, dim, false), 0, samples, dim, keys, grads);
    reference.apply(keys, grads);
  }
  Rows expected;
  reference.for_each_row([&](std::uint64_t k, std::span<const float> v, std::span<const float>, std::uint64_t) {
    expected[k] = std::vector<float>(v.begin(), v.end());
  });
  for (std::size_t S : {1, 2, 3}) {
    CAPTURE(S);
    CHECK(sync_run(1, S, steps, false) == expected);
  }
}


TEST_CASE("synchronous steps of N workers equal one worker pushing the batch's summed gradient") {
  // Gradients that are multiples of 2^-12 and small sum exactly in any order: every N gives the
  // same rows bit for bit. Arbitrary gradients: each worker sums its own samples first, so the
  // order of the additions differs from one worker's (samples 0..7 in turn), and N = 2, 4 agree
  // with N = 1 to float rounding only; N = 1 over 1, 2 or 3 servers is bitwise the same.
  constexpr std::size_t steps = 3;
  for (bool exact : {true, false}) {
    CAPTURE(exact);
    const Rows one = sync_run(1, 1, steps, exact);
    REQUIRE(one.size() > 10);
    CHECK(sync_run(1, 2, steps, exact) == one);
    for (std::size_t W : {2, 4})
      for (std::size_t S : {1, 2}) {
        CAPTURE(W);
        CAPTURE(S);
        const Rows many = sync_run(W, S, steps, exact);
        REQUIRE(many.size() == one.size());
        for (const auto& [key, row] : one) {
          REQUIRE(many.count(key) == 1);
          for (std::size_t i = 0; i < row.size(); ++i) {
            if (exact) {
              CHECK(many.at(key)[i] == row[i]);
            } else {
              CHECK(many.at(key)[i] == doctest::Approx(row[i]).epsilon(1e-6));
            }
          }
        }
      }
  }
}

// ---- initial rows -------------------------------------------------------------------------------

TEST_CASE("rows start from (seed, table, key) alone, the same over any number of servers") {
  constexpr std::size_t dim = 5;
  std::vector<std::uint64_t> keys;
  for (std::uint64_t k = 0; k < 40; ++k) keys.push_back(k);  // small bucket numbers
  for (std::uint64_t k = 0; k < 20; ++k) keys.push_back(0xfedcba9876543210ULL - 977 * k);
  std::vector<std::vector<float>> pulled;
  for (std::size_t S : {1, 2, 3}) {
    auto servers = make_servers(S, {spec(dim, 3), spec(dim, 4)});
    std::vector<float> a(keys.size() * dim), b(keys.size() * dim);
    run_job<codec::Fp32>(servers, 1, {dim, dim}, false, 0, [&](std::size_t, RowClient<codec::Fp32>& c, InProcess::endpoint& e) {
      c.pull(e, 0, 0, keys, a);
      c.pull(e, 1, 0, keys, b);
    });
    for (std::size_t i = 0; i < keys.size(); ++i)
      for (std::size_t j = 0; j < dim; ++j) {
        CHECK(a[i * dim + j] == sparse::initial_row_value(1234, 3, keys[i], j, 0.5f));
        CHECK(std::abs(a[i * dim + j]) <= 0.5f);
      }
    CHECK(a != b);  // another table id, other rows
    // Small consecutive keys spread over the servers.
    for (const auto& s : servers) CHECK(s->rows(0) >= keys.size() / (2 * S));
    pulled.push_back(a);
  }
  CHECK(pulled[1] == pulled[0]);
  CHECK(pulled[2] == pulled[0]);
  // Not a constant: values spread over the range.
  const auto [lo, hi] = std::minmax_element(pulled[0].begin(), pulled[0].end());
  CHECK(*lo < -0.3f);
  CHECK(*hi > 0.3f);
}

struct ZeroRows : optim::RowSGD {
  static constexpr bool zero_initial_rows = true;
};

TEST_CASE("an optimizer that needs zero rows gets zero rows, and a non-zero init_scale is refused") {
  static_assert(row_optimizer_needs_zero_rows<ZeroRows>);
  CHECK_THROWS_AS(sparse::RowShard<ZeroRows>(spec(4), ZeroRows{}), ConfigError);
  sparse::RowShard<ZeroRows> shard(spec(4, 7, 0.0f), ZeroRows{});
  for (float v : shard.row(99)) CHECK(v == 0.0f);
}

// ---- bytes per step -----------------------------------------------------------------------------

template <class Codec>
void check_bytes_per_step() {
  // A step of K distinct keys of dim D, codec bytes c per value, S servers. Every request and reply
  // is a header of H = RowHeader::size bytes to each server, and a payload (when there are keys):
  //   pull request = S*H + 8K;   pull reply = S*H + K*D*c;   push = S*H + 8K + K*D*c.
  constexpr std::size_t H = sparse::detail::RowHeader::size, key_bytes = 8, D = 6, K = 37, S = 2;
  const std::size_t c = Codec::encoded_size(1);
  auto servers = make_servers<Codec>(S, {spec(D)});
  std::vector<std::uint64_t> keys(K);
  for (std::size_t i = 0; i < K; ++i) keys[i] = 3 * i + 1;
  TrafficCounters before, after_pull, after_push;
  sparse::RowTraffic pull_traffic, push_traffic;
  run_job<Codec>(servers, 1, {D}, false, 0, [&](std::size_t, RowClient<Codec>& client, InProcess::endpoint& e) {
    std::vector<float> rows(K * D), grads(K * D, 0.25f);
    before = e.counters();
    client.pull(e, 0, 0, keys, rows);
    after_pull = e.counters();
    pull_traffic = client.traffic();
    client.push(e, 0, 0, keys, grads);
    after_push = e.counters();
    push_traffic = client.traffic();
  });
  REQUIRE(servers[0]->rows(0) > 0);
  REQUIRE(servers[1]->rows(0) > 0);  // both servers got keys: both payloads were sent
  CHECK(after_pull.payload_bytes_sent - before.payload_bytes_sent == S * H + key_bytes * K);
  CHECK(after_pull.payload_bytes_received - before.payload_bytes_received == S * H + K * D * c);
  CHECK(after_push.payload_bytes_sent - after_pull.payload_bytes_sent == S * H + key_bytes * K + K * D * c);
  CHECK(after_push.payload_bytes_received == after_pull.payload_bytes_received);
  // The client's own count says the same, by kind.
  CHECK(pull_traffic.header_bytes_sent == S * H);
  CHECK(pull_traffic.key_bytes_sent == key_bytes * K);
  CHECK(pull_traffic.header_bytes_received == S * H);
  CHECK(pull_traffic.value_bytes_received == K * D * c);
  CHECK(push_traffic.bytes_sent() - pull_traffic.bytes_sent() == S * H + key_bytes * K + K * D * c);
  CHECK(push_traffic.value_bytes_sent == K * D * c);
  // The servers' counters: one pull and one push each, every key once.
  CHECK(servers[0]->counters().pulls == 1);
  CHECK(servers[1]->counters().pushes == 1);
  CHECK(servers[0]->counters().keys_pulled + servers[1]->counters().keys_pulled == K);
  CHECK(servers[0]->counters().keys_pushed + servers[1]->counters().keys_pushed == K);
  CHECK(servers[0]->rows(0) + servers[1]->rows(0) == K);
}

TEST_CASE("the bytes of a step equal the formula exactly, for 4-byte and 2-byte codecs") {
  check_bytes_per_step<codec::Fp32>();
  check_bytes_per_step<codec::Fp16>();
  check_bytes_per_step<codec::Bf16>();
}

// ---- 16-bit codecs ------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("16-bit codecs round pulled rows and pushed gradients as the codec rounds", Codec, codec::Fp16,
                   codec::Bf16) {
  constexpr std::size_t D = 4, S = 2;
  constexpr float lr = 0.5f;
  const std::vector<std::uint64_t> keys{5, 11, 17, 23, 29, 31};
  const std::size_t K = keys.size();
  std::vector<float> grads(K * D);
  for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = 0.0123456f * static_cast<float>(i + 1);
  std::vector<float> first(K * D), second(K * D);
  auto servers = make_servers<Codec>(S, {spec(D)}, optim::RowSGD{lr});
  run_job<Codec>(servers, 1, {D}, true, 0, [&](std::size_t, RowClient<Codec>& c, InProcess::endpoint& e) {
    c.pull(e, 0, 0, keys, first);
    c.push(e, 0, 0, keys, grads);
    c.pull(e, 0, 1, keys, second);
  });
  auto round = [](std::vector<float> v) {
    std::vector<std::byte> b(Codec::encoded_size(v.size()));
    Codec::encode(std::span<const float>(v), b);
    Codec::decode(b, std::span<float>(v));
    return v;
  };
  std::vector<float> exact(K * D), updated(K * D);
  for (std::size_t i = 0; i < K; ++i)
    for (std::size_t j = 0; j < D; ++j) exact[i * D + j] = sparse::initial_row_value(1234, 7, keys[i], j, 0.5f);
  const auto g = round(grads);
  for (std::size_t i = 0; i < exact.size(); ++i) updated[i] = exact[i] - lr * g[i];
  CHECK(first == round(exact));
  CHECK(second == round(updated));
  CHECK(round(exact) != exact);  // the rounding was real
  // The servers keep full-precision rows; only the wire is 16-bit.
  const Rows held = rows_of(servers, 0);
  for (std::size_t i = 0; i < K; ++i)
    for (std::size_t j = 0; j < D; ++j) CHECK(held.at(keys[i])[j] == updated[i * D + j]);
}

// ---- asynchronous serving and bounded staleness -------------------------------------------------

constexpr Tag user_tag = 5;  // the workers' own messages, below the reserved tags

TEST_CASE("asynchronous serving applies each push as it arrives: two pushes are two optimizer steps") {
  constexpr std::size_t D = 2;
  const std::vector<std::uint64_t> key{42};
  const std::vector<std::vector<float>> g{{0.5f, -0.25f}, {0.125f, 0.75f}};
  for (std::size_t S : {1, 2}) {
    CAPTURE(S);
    auto servers = make_servers(S, {spec(D)}, TestAdagrad{});
    std::vector<float> seen(D);
    std::array<std::byte, 1> token{};
    run_job<codec::Fp32>(servers, 2, {D}, false, std::numeric_limits<std::size_t>::max(),
                         [&](std::size_t w, RowClient<codec::Fp32>& c, InProcess::endpoint& e) {
                           std::vector<float> row(D);
                           if (w == 1) e.recv(0, user_tag, token);  // worker 0's push is applied first
                           c.push(e, 0, 0, key, g[w]);
                           c.pull(e, 0, 1, key, row);  // answered after this worker's own push
                           if (w == 0) e.send(1, user_tag, token);
                           if (w == 1) seen = row;
                         });
    sparse::RowShard<TestAdagrad> reference(spec(D), TestAdagrad{});
    reference.apply(key, g[0]);
    reference.apply(key, g[1]);
    const auto expected = reference.row(42);
    CHECK(seen == std::vector<float>(expected.begin(), expected.end()));
    std::vector<float> summed{g[0][0] + g[1][0], g[0][1] + g[1][1]};
    sparse::RowShard<TestAdagrad> once(spec(D), TestAdagrad{});
    once.apply(key, summed);
    CHECK(std::vector<float>(once.row(42).begin(), once.row(42).end()) != seen);  // not one step of the sum
  }
}

TEST_CASE("under a staleness bound a fast worker's pull waits until the slowest is within the bound") {
  // Bound 1. Worker 0 pushes steps 0, 1, 2 (its clock: 3) and asks for its rows; only then does
  // worker 1 start. Its first push (clock 1) leaves worker 0 two ahead: still waiting; its second
  // (clock 2) releases it. Worker 0's rows must show both of worker 1's pushes, and worker 1 does
  // not push a third time before worker 0 has its reply: had the server waited for more, the job
  // would fail with the transport's timeout.
  using sparse::detail::RowHeader;
  namespace row_tags = sparse::detail::row_tags;
  constexpr std::size_t D = 1;
  constexpr float lr = 1.0f;
  const std::vector<std::uint64_t> key{9};
  auto servers = make_servers(1, {spec(D)}, optim::RowSGD{lr});
  std::vector<float> seen(D);
  std::array<std::byte, 1> token{};
  run_job<codec::Fp32>(servers, 2, {D}, false, 1, [&](std::size_t w, RowClient<codec::Fp32>& c, InProcess::endpoint& e) {
    std::vector<float> row(D);
    if (w == 0) {
      for (std::uint64_t step = 0; step < 3; ++step) c.push(e, 0, step, key, std::vector<float>{1.0f});
      // The pull by hand, so that worker 1 is told to start only once the request is on its way.
      std::array<std::byte, RowHeader::size> h{};
      RowHeader{RowHeader::pull, 0, 0, 0, 3, 1}.write(h.data());
      e.send(2, row_tags::request, h);
      std::array<std::byte, 8> k{};
      sparse::detail::write_keys(k.data(), key.data(), 1);
      e.send(2, row_tags::request_payload, k);
      e.send(1, user_tag, token);
      e.recv(2, row_tags::reply, h);
      CHECK(RowHeader::read(h.data()).count == 1);
      std::array<std::byte, 4> v{};
      e.recv(2, row_tags::reply_payload, v);
      codec::Fp32::decode(v, std::span<float>(seen));
      e.send(1, user_tag, token);
    } else {
      e.recv(0, user_tag, token);
      c.push(e, 0, 0, key, std::vector<float>{10.0f});
      c.push(e, 0, 1, key, std::vector<float>{100.0f});
      e.recv(0, user_tag, token);
      c.push(e, 0, 2, key, std::vector<float>{1000.0f});
    }
  });
  const float init = sparse::initial_row_value(1234, 7, 9, 0, 0.5f);
  CHECK(seen[0] == init - 1.0f - 1.0f - 1.0f - 10.0f - 100.0f);
  CHECK(rows_of(servers, 0).at(9)[0] == init - 1.0f - 1.0f - 1.0f - 10.0f - 100.0f - 1000.0f);
}

// ---- memory bound -------------------------------------------------------------------------------

TEST_CASE("creating a row past a shard's memory bound is an error naming the table, shard, rows and bound") {
  TableSpec bounded = spec(16);
  sparse::RowShard<TestAdagrad> probe(bounded, TestAdagrad{});
  const std::size_t chunk = probe.chunk_rows() * probe.row_bytes();
  bounded.max_bytes_per_shard = 2 * chunk + flotilla::detail::KeyMap::bytes_for_size(2 * probe.chunk_rows());
  sparse::RowShard<TestAdagrad> shard(bounded, TestAdagrad{}, 1, 4);
  std::uint64_t key = 0;
  std::string message;
  try {
    for (; key < 1000000; ++key) (void)shard.row(key);
  } catch (const Error& err) {
    message = err.what();
  }
  REQUIRE(!message.empty());
  CHECK(key == 2 * probe.chunk_rows());  // two chunks fit, a third would not
  CHECK(shard.rows() == key);
  CHECK(shard.bytes() <= bounded.max_bytes_per_shard);
  CHECK(message.find("table 'clicks7'") != std::string::npos);
  CHECK(message.find("shard 1 of 4") != std::string::npos);
  CHECK(message.find("holds " + std::to_string(key) + " rows") != std::string::npos);
  CHECK(message.find(std::to_string(bounded.max_bytes_per_shard) + " bytes") != std::string::npos);
  // The rows held are intact and usable.
  CHECK(shard.row(0)[0] == sparse::initial_row_value(1234, 7, 0, 0, 0.5f));
}

TEST_CASE("a server whose table is full stops with the memory bound's error rather than crashing") {
  TableSpec bounded = spec(8);
  bounded.max_bytes_per_shard = 1000;  // not even one chunk
  auto servers = make_servers(1, {bounded});
  std::vector<std::uint64_t> keys{1, 2, 3};
  std::vector<float> rows(3 * 8);
  CHECK_THROWS_WITH_AS(run_job<codec::Fp32>(servers, 1, {8}, false, 0,
                                            [&](std::size_t, RowClient<codec::Fp32>& c, InProcess::endpoint& e) {
                                              c.pull(e, 0, 0, keys, rows);
                                            }),
                       doctest::Contains("max_bytes_per_shard"), Error);
}

// ---- checkpoints --------------------------------------------------------------------------------

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() / ("flotilla-rows-" + name + "-" +
                                                       std::to_string(reinterpret_cast<std::uintptr_t>(this)))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

struct FullRow {
  std::vector<float> values, state;
  std::uint64_t updates;
  friend bool operator==(const FullRow&, const FullRow&) = default;
};
std::map<std::uint64_t, FullRow> full_rows(const sparse::detail::RowTableBase& t) {
  std::map<std::uint64_t, FullRow> out;
  t.for_each_row([&](std::uint64_t k, std::span<const float> v, std::span<const float> s, std::uint64_t n) {
    out[k] = FullRow{{v.begin(), v.end()}, {s.begin(), s.end()}, n};
  });
  return out;
}

TEST_CASE("a saved shard loads back with its rows, optimizer state and update counts") {
  TempDir dir("roundtrip");
  const std::string file = (dir.path / "shard.bin").string();
  sparse::RowShard<TestAdagrad> shard(spec(3), TestAdagrad{});
  for (std::uint64_t step = 0; step < 4; ++step) {
    std::vector<std::uint64_t> keys{step, step + 1, 100 + step * step};
    std::vector<float> g(9);
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = 0.1f * static_cast<float>(i) - 0.3f + static_cast<float>(step);
    shard.apply(keys, g);
  }
  shard.save(file);
  CHECK(!std::filesystem::exists(file + ".tmp"));
  sparse::RowShard<TestAdagrad> loaded(spec(3), TestAdagrad{});
  (void)loaded.row(555);  // replaced by the load
  loaded.load(file);
  CHECK(loaded.rows() == shard.rows());
  CHECK(loaded.updates() == 4);
  CHECK(full_rows(loaded) == full_rows(shard));
  CHECK(full_rows(shard).at(1).updates == 2);
  CHECK(full_rows(shard).at(1).state != std::vector<float>(3, 0.125f));

  // A shard whose bound cannot hold the file's rows refuses it and keeps its own.
  TableSpec small = spec(3);
  small.max_bytes_per_shard = 1;
  sparse::RowShard<TestAdagrad> tiny(small, TestAdagrad{});
  CHECK_THROWS_WITH_AS(tiny.load(file), doctest::Contains("max_bytes_per_shard"), DataError);
  CHECK(tiny.rows() == 0);

  // A file of another table is refused, naming the file.
  sparse::RowShard<TestAdagrad> other(spec(3, 8), TestAdagrad{});
  CHECK_THROWS_WITH_AS(other.load(file), doctest::Contains(file.c_str()), DataError);

  // One flipped byte: the CRC says so, naming the file.
  std::vector<char> bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto write = [&](const std::vector<char>& b) {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(b.data(), static_cast<std::streamsize>(b.size()));
  };
  auto corrupt = bytes;
  corrupt[corrupt.size() / 2] = static_cast<char>(corrupt[corrupt.size() / 2] ^ 0x10);
  write(corrupt);
  const std::string crc_message = file + " (byte " + std::to_string(bytes.size() - 4) + "): CRC-32";
  CHECK_THROWS_WITH_AS(loaded.load(file), doctest::Contains(crc_message.c_str()),
                       DataError);
  // Truncated: the row count does not fit the size.
  write(std::vector<char>(bytes.begin(), bytes.end() - 10));
  CHECK_THROWS_WITH_AS(loaded.load(file), doctest::Contains("truncated"), DataError);
  write(std::vector<char>(bytes.begin(), bytes.begin() + 20));
  CHECK_THROWS_WITH_AS(loaded.load(file), doctest::Contains(file.c_str()), DataError);
  CHECK_THROWS_WITH_AS(loaded.load((dir.path / "missing.bin").string()), doctest::Contains("missing.bin"), DataError);
}

/// W workers, S servers, synchronous, steps [first, last) of the exact-sum batches on two tables
/// with TestAdagrad; servers restored from `restore` first when given, and worker 0 asking for a
/// checkpoint into `save` after step `save_after` when given.
std::vector<std::unique_ptr<RowServer<codec::Fp32>>> adagrad_run(std::size_t W, std::size_t S, std::size_t first,
                                                                  std::size_t last, const std::string& restore,
                                                                  const std::string& save, std::size_t save_after,
                                                                  bool* saved = nullptr) {
  constexpr std::size_t dim = 3, samples = 8;
  auto servers = make_servers(S, {spec(dim, 1), spec(dim, 2)}, TestAdagrad{});
  if (!restore.empty())
    for (auto& s : servers) s->restore(restore);
  run_job<codec::Fp32>(servers, W, {dim, dim}, true, 0, [&](std::size_t w, RowClient<codec::Fp32>& c, InProcess::endpoint& e) {
    std::vector<std::uint64_t> keys;
    std::vector<float> grads, rows;
    for (std::size_t step = first; step < last; ++step) {
      for (std::size_t t = 0; t < 2; ++t) {
        const auto batch = make_batch(step * 2 + t, samples, dim, true);
        coalesce(batch, w * samples / W, (w + 1) * samples / W, dim, keys, grads);
        rows.resize(keys.size() * dim);
        c.pull(e, t, step, keys, rows);
        c.push(e, t, step, keys, grads);
      }
      if (w == 0 && !save.empty() && step == save_after) {
        const bool ok = c.checkpoint(e, step, save);
        if (saved) *saved = ok;
      }
    }
  });
  return servers;
}

TEST_CASE("servers restored from a checkpoint continue exactly as servers that never stopped") {
  TempDir dir("continue");
  const std::string ckpt = (dir.path / "step2").string();
  for (std::size_t S : {1, 2}) {
    CAPTURE(S);
    const auto straight = adagrad_run(2, S, 0, 5, "", "", 0);
    bool saved = false;
    // The checkpoint is taken after step 2 (k = 3 steps); the run goes on to step 4 and is dropped.
    (void)adagrad_run(2, S, 0, 5, "", ckpt, 2, &saved);
    CHECK(saved);
    for (std::size_t s = 0; s < S; ++s)
      for (std::size_t t = 0; t < 2; ++t) CHECK(std::filesystem::exists(sparse::row_shard_path(ckpt, t, s, S)));
    const auto resumed = adagrad_run(2, S, 3, 5, ckpt, "", 0);
    for (std::size_t s = 0; s < S; ++s)
      for (std::size_t t = 0; t < 2; ++t) {
        CHECK(full_rows(resumed[s]->table(t)) == full_rows(straight[s]->table(t)));
        CHECK(resumed[s]->table(t).updates() == straight[s]->table(t).updates());
      }
    // And the checkpoint held step 2's rows, not a later step's. A worker may already have pulled
    // step 3's rows of one table when the checkpoint is taken: rows created by such a pull are as
    // they would be created again (initial values and state, no update), so they are left out.
    const auto three = adagrad_run(2, S, 0, 3, "", "", 0);
    auto check_point = make_servers(S, {spec(3, 1), spec(3, 2)}, TestAdagrad{});
    auto updated = [](std::map<std::uint64_t, FullRow> rows) {
      std::erase_if(rows, [](const auto& kv) { return kv.second.updates == 0; });
      return rows;
    };
    for (std::size_t s = 0; s < S; ++s) {
      check_point[s]->restore(ckpt);
      for (std::size_t t = 0; t < 2; ++t) {
        CHECK(updated(full_rows(check_point[s]->table(t))) == updated(full_rows(three[s]->table(t))));
        CHECK(check_point[s]->table(t).updates() == 3);
        for (const auto& [key, row] : full_rows(check_point[s]->table(t)))
          if (row.updates == 0) CHECK(row.values[0] == sparse::initial_row_value(1234, static_cast<std::uint32_t>(t + 1), key, 0, 0.5f));
      }
    }
  }
}

// ---- lost workers -------------------------------------------------------------------------------

/// An in-process endpoint whose first receive from any peer reports worker `lost` lost, as a
/// transport that outlives its peers does when one dies.
struct LosingEndpoint {
  InProcess::endpoint& e;
  std::size_t lost;
  bool reported = false, continuing = false;

  std::size_t rank() const noexcept { return e.rank(); }
  std::size_t size() const noexcept { return e.size(); }
  TrafficCounters counters() const noexcept { return e.counters(); }
  void send(std::size_t peer, Tag tag, std::span<const std::byte> b) { e.send(peer, tag, b); }
  void recv(std::size_t peer, Tag tag, std::span<std::byte> b) { e.recv(peer, tag, b); }
  void sendrecv(std::size_t to, Tag tag, std::span<const std::byte> out, std::size_t from, std::span<std::byte> in) {
    e.sendrecv(to, tag, out, from, in);
  }
  std::size_t recv_any(Tag tag, std::span<std::byte> b) {
    if (!reported) {
      reported = true;
      throw PeerLostError("rank " + std::to_string(rank()) + ": worker " + std::to_string(lost) + " was lost", lost);
    }
    return e.recv_any(tag, b);
  }
  void barrier() { e.barrier(); }
  void continue_without_lost_peers(bool on) { continuing = on; }
};
static_assert(Transport<LosingEndpoint> && ContinuesWithoutLostPeers<LosingEndpoint>);

/// Two workers and one server; worker 1 dies at once. Worker 0 runs three steps (pull, push) and
/// returns what it pulled last.
std::vector<float> run_with_lost_worker(bool aggregate, std::size_t staleness, std::optional<bool> go_on,
                                        std::vector<std::unique_ptr<RowServer<codec::Fp32>>>& servers) {
  sparse::RowServerOptions options;
  options.continue_without_lost_workers = go_on;
  servers = make_servers(1, {spec(1)}, optim::RowSGD{1.0}, options);
  const std::vector<std::uint64_t> key{3};
  std::vector<float> row(1);
  InProcess::run(quick(), 3, [&](InProcess::endpoint& e) {
    if (e.rank() == 2) {
      LosingEndpoint losing{e, 1};
      servers[0]->serve(losing, 2, aggregate, staleness);
      return;
    }
    if (e.rank() == 1) return;  // dies before sending anything
    RowClient<> c({1}, 2, 1);
    for (std::uint64_t step = 0; step < 3; ++step) {
      c.pull(e, 0, step, key, row);
      c.push(e, 0, step, key, std::vector<float>{1.0f});
    }
    c.pull(e, 0, 3, key, row);
    c.done(e);
  });
  return row;
}

TEST_CASE("a lost worker stops synchronous serving by default, and is dropped by asynchronous serving") {
  std::vector<std::unique_ptr<RowServer<codec::Fp32>>> servers;
  const float init = sparse::initial_row_value(1234, 7, 3, 0, 0.5f);
  // Asynchronous under a staleness bound: the dead worker's clock no longer holds the other back.
  CHECK(run_with_lost_worker(false, 1, std::nullopt, servers)[0] == init - 3.0f);
  REQUIRE(servers[0]->dropped_workers().size() == 1);
  CHECK(servers[0]->dropped_workers()[0].find("worker 1 was lost") != std::string::npos);
  // Synchronous: the transport's error, naming the worker.
  CHECK_THROWS_WITH_AS(run_with_lost_worker(true, 0, std::nullopt, servers), doctest::Contains("worker 1 was lost"),
                       PeerLostError);
  // Synchronous, told to go on: the steps are those of the worker left.
  CHECK(run_with_lost_worker(true, 0, true, servers)[0] == init - 3.0f);
  CHECK(servers[0]->counters().steps_applied == 3);
}

// ---- peers that announce too much ---------------------------------------------------------------

TEST_CASE("a worker announcing more keys than the bound is refused with an error naming it") {
  using sparse::detail::RowHeader;
  sparse::RowServerOptions options;
  options.max_keys_per_message = 16;
  auto servers = make_servers(1, {spec(4)}, optim::RowSGD{}, options);
  for (std::uint32_t kind : {RowHeader::pull, RowHeader::push}) {
    CAPTURE(kind);
    CHECK_THROWS_WITH_AS(InProcess::run(quick(), 2,
                                        [&](InProcess::endpoint& e) {
                                          if (e.rank() == 1) {
                                            servers[0]->serve(e, 1, true, 0);
                                            return;
                                          }
                                          std::array<std::byte, RowHeader::size> h{};
                                          RowHeader{kind, 0, 0, 0, 0, 17}.write(h.data());
                                          e.send(1, sparse::detail::row_tags::request, h);
                                        }),
                         doctest::Contains("worker 0 announced a"), TransportError);
  }
  // A count whose rows would overflow the bytes: refused before anything is allocated.
  CHECK_THROWS_WITH_AS(InProcess::run(quick(), 2,
                                      [&](InProcess::endpoint& e) {
                                        if (e.rank() == 1) {
                                          servers[0]->serve(e, 1, false, 0);
                                          return;
                                        }
                                        std::array<std::byte, RowHeader::size> h{};
                                        RowHeader{RowHeader::push, 0, 0, 0, 0, ~std::uint64_t{0}}.write(h.data());
                                        e.send(1, sparse::detail::row_tags::request, h);
                                      }),
                       doctest::Contains("worker 0"), TransportError);
}

TEST_CASE("a client refuses a reply whose row count differs from its request, naming the server") {
  using sparse::detail::RowHeader;
  CHECK_THROWS_WITH_AS(InProcess::run(quick(), 2,
                                      [&](InProcess::endpoint& e) {
                                        std::array<std::byte, RowHeader::size> h{};
                                        if (e.rank() == 1) {  // a server that answers with too many rows
                                          e.recv(0, sparse::detail::row_tags::request, h);
                                          RowHeader{RowHeader::reply, 0, 0, 0, 0, 1000}.write(h.data());
                                          e.send(0, sparse::detail::row_tags::reply, h);
                                          return;
                                        }
                                        RowClient<> client({4}, 1, 1);
                                        std::vector<float> rows;
                                        client.pull(e, 0, 0, std::span<const std::uint64_t>(), rows);
                                      }),
                       doctest::Contains("server 0 (rank 1)"), TransportError);
}

}  // namespace sparse_rows_tests
