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

}  // namespace sparse_rows_tests
