// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// A table of 2^24 rows of 16 floats (1 GiB of values) split over four row servers, trained by
// workers that never hold more than one step's rows. Run under flotilla-launch as
//
//   flotilla-launch -n 6 -- flotilla_distributed_tcp sparse-memory       2 workers, 4 servers
//   flotilla-launch -n 5 -- flotilla_distributed_tcp sparse-memory       1 worker,  4 servers
//
// The last four ranks serve the table (RowSGD: no optimizer state, so the rows are the 1 GiB of
// values and nothing more), the others split the 2^24 keys between them and walk through their
// part in steps of 65536 keys: pull the rows, check that each holds its initial values, push the
// row itself as its gradient. With a learning rate of 1/2 every row ends at exactly half its
// initial values, which each worker checks on a sample of its keys at the end.
//
// Asynchronous serving: the workers' keys are disjoint, so summing a step over the workers (what
// synchronous serving is for) would add nothing but a wait for the slower worker at every step and
// the pushes of both queued on every server until the step is complete. Each push is applied as it
// arrives instead, and since no row is touched by two workers the result is the same whatever the
// order: the final rows are still known exactly.
//
// Then every process reads its peak resident memory (VmHWM, /proc/self/status):
//  - a worker's stays below 64 MiB: it holds one step's keys and rows (pushed back as their own
//    gradients) and the client's buffers, never the table;
//  - a server holds exactly the keys owner_of gives it (within 1% of a quarter), received each of
//    them once in a push, and its peak is at least the values and update counts it holds (72 bytes
//    a row: they are resident), at most what its shard counts (RowShard::bytes(), which includes
//    an estimate of the key map) plus 32 MiB for the program and its buffers, and less than twice
//    the values.
// A worker's traffic (RowClient::traffic()) must equal, byte for byte, what docs/sparse.md's
// formula gives for the keys it moved. Every process sends its figures to rank 0, which prints
// them on one line; the test passes when every process exits 0.
#include <algorithm>
#include <array>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "flotilla/codec/fp32.hpp"
#include "flotilla/codec/little_endian.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/optim/row_sgd.hpp"
#include "flotilla/sparse/row_client.hpp"
#include "flotilla/sparse/row_server.hpp"
#include "flotilla/sparse/row_table.hpp"
#include "flotilla/transport/tcp.hpp"
#include "../common/test_program.hpp"

namespace flotilla_test::sparse_memory {

namespace fl = flotilla;

namespace {

// Under AddressSanitizer or ThreadSanitizer every allocation carries shadow memory and red zones,
// so the peak resident set measures the sanitizer rather than the table: such builds train a
// sixteenth of the keys (in a sanitizer's time and memory) and check only the lower bounds of
// memory (the rows are resident), not the upper ones.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool sanitized = true;
constexpr unsigned keys_log2 = 20;
#else
constexpr bool sanitized = false;
constexpr unsigned keys_log2 = 24;
#endif

constexpr std::size_t servers = 4;
constexpr std::uint64_t keys_total = std::uint64_t{1} << keys_log2;
constexpr std::size_t dim = 16;
constexpr std::size_t step_keys = 65536;
constexpr float init_scale = 0.5f;
constexpr double learning_rate = 0.5;  // with the row as its own gradient: every row ends at half
/// Every this many keys of a worker's range is pulled again at the end.
constexpr std::uint64_t sample_stride = 4099;

constexpr std::size_t mib = std::size_t{1} << 20;
/// A quarter of a server's values: a worker holds one step's keys and rows (4.5 MiB) and the
/// client's message buffers, never more.
constexpr std::size_t worker_rss_bound = 64 * mib;
/// What a server's process may hold beyond what its shard counts (RowShard::bytes()): the program,
/// its libraries, the transport and the buffers of a few messages.
constexpr std::size_t server_rss_allowance = 32 * mib;
/// A server's rows may differ from a quarter of the keys by this fraction. owner_of is a fixed
/// function, so the counts are the same on every run; 1% is 6 standard deviations of a random
/// assignment's spread at 2^20 keys and 24 at 2^24, so a hash as good as random passes easily.
constexpr double spread_tolerance = 0.01;

// Rank 0 collects one report from every other process on this tag (below the reserved ones).
constexpr fl::Tag report_tag = 0x5e30;

fl::sparse::TableSpec table_spec() {
  fl::sparse::TableSpec spec;
  spec.name = "memory";
  spec.dim = dim;
  spec.init_scale = init_scale;
  spec.seed = 2024;
  spec.id = 3;
  // A guard against a spread gone wrong: a shard refuses rows rather than take the machine's memory.
  spec.max_bytes_per_shard = 1024 * mib;
  return spec;
}

/// This process's peak resident set (VmHWM), in bytes.
std::size_t peak_rss() {
  const char* path = "/proc/self/status";
  std::ifstream in(path);
  if (!in) throw fl::DataError(path, 0, "cannot open it to read the peak resident set (VmHWM)");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    std::size_t kib = 0;
    if (std::sscanf(line.c_str() + 6, "%zu", &kib) != 1 || line.find("kB") == std::string::npos)
      throw fl::DataError(path, 0, "cannot parse '" + line + "' as a size in kB");
    return kib * 1024;
  }
  throw fl::DataError(path, 0, "has no VmHWM line");
}

/// The keys of worker w of W: a contiguous range, so that the workers together touch each key once.
std::pair<std::uint64_t, std::uint64_t> range_of(std::size_t w, std::size_t workers) {
  return {keys_total * w / workers, keys_total * (w + 1) / workers};
}

/// The sample of keys pulled again at the end: every sample_stride-th key of the range.
std::vector<std::uint64_t> sample_of(std::pair<std::uint64_t, std::uint64_t> range) {
  std::vector<std::uint64_t> keys;
  for (std::uint64_t k = range.first; k < range.second; k += sample_stride) keys.push_back(k);
  return keys;
}

double as_mib(std::uint64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(mib); }

/// What one process measured, sent to rank 0 as little-endian u64s.
struct Report {
  std::uint64_t rank = 0, server = 0, ok = 0, peak_rss = 0;
  std::uint64_t rows = 0;        ///< server: rows held; worker: keys it trained
  std::uint64_t bytes = 0;       ///< server: the shard's own count, RowShard::bytes(); worker: bytes sent
  std::uint64_t received = 0;    ///< worker: bytes received
  std::uint64_t millis = 0;      ///< the time the process spent training or serving

  static constexpr std::size_t fields = 8, size = fields * 8;
  std::array<std::byte, size> encode() const {
    std::array<std::byte, size> out{};
    const std::array<std::uint64_t, fields> v{rank, server, ok, peak_rss, rows, bytes, received, millis};
    for (std::size_t i = 0; i < fields; ++i) fl::detail::store_le(out.data() + 8 * i, v[i]);
    return out;
  }
  static Report decode(std::span<const std::byte, size> in) {
    std::array<std::uint64_t, fields> v{};
    for (std::size_t i = 0; i < fields; ++i) v[i] = fl::detail::load_le<std::uint64_t>(in.data() + 8 * i);
    return Report{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
  }
};

/// Counts a failed check, saying what and where.
struct Checks {
  std::size_t rank;
  std::size_t failed = 0;
  [[gnu::format(printf, 2, 3)]] void fail(const char* format, ...) {
    ++failed;
    std::fprintf(stderr, "sparse-memory: rank %zu: ", rank);
    std::va_list args;
    va_start(args, format);
    std::vfprintf(stderr, format, args);
    va_end(args);
    std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }
};

template <class E>
Report serve(E& e, std::size_t workers, Checks& checks) {
  const std::size_t shard = e.rank() - workers;
  fl::sparse::RowServer<fl::codec::Fp32> server(shard, servers);
  server.add_table(table_spec(), fl::optim::RowSGD{learning_rate});
  const auto start = std::chrono::steady_clock::now();
  server.serve(e, workers, /*aggregate*/ false, std::numeric_limits<std::size_t>::max());
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);

  // What this server must hold: the keys owner_of gives it, and among the samples pulled again at
  // the end, the ones it owns.
  std::uint64_t owned = 0, sampled = 0;
  for (std::uint64_t k = 0; k < keys_total; ++k) owned += fl::sparse::owner_of(k, servers) == shard;
  for (std::size_t w = 0; w < workers; ++w)
    for (const std::uint64_t k : sample_of(range_of(w, workers))) sampled += fl::sparse::owner_of(k, servers) == shard;

  const std::size_t rows = server.rows(0);
  const auto& c = server.counters();
  const double quarter = static_cast<double>(keys_total) / servers;
  if (rows != owned) checks.fail("server %zu holds %zu rows, owner_of gives it %" PRIu64 " keys", shard, rows, owned);
  if (std::abs(static_cast<double>(rows) - quarter) > quarter * spread_tolerance)
    checks.fail("server %zu holds %zu rows, more than %.0f%% away from a quarter of the keys (%.0f)", shard, rows,
                100 * spread_tolerance, quarter);
  if (c.keys_pushed != owned)
    checks.fail("server %zu received pushes of %" PRIu64 " keys, expected each of its %" PRIu64 " keys once", shard,
                c.keys_pushed, owned);
  if (c.keys_pulled != owned + sampled)
    checks.fail("server %zu answered pulls of %" PRIu64 " keys, expected %" PRIu64 " (its keys once, and %" PRIu64
                " sampled again)", shard, c.keys_pulled, owned + sampled, sampled);

  // Every row's values and update count are written when it is created: they are resident.
  const std::size_t rss = peak_rss(), values = rows * dim * sizeof(float), written = rows * (dim * sizeof(float) + 8);
  const std::size_t counted = server.bytes(0);
  if (rss < written)
    checks.fail("server %zu: peak resident set %.1f MiB is less than the %.1f MiB of values and update counts it holds",
                shard, as_mib(rss), as_mib(written));
  if (!sanitized && rss > counted + server_rss_allowance)
    checks.fail("server %zu: peak resident set %.1f MiB is more than the %.1f MiB its shard counts and %.0f MiB beside",
                shard, as_mib(rss), as_mib(counted), as_mib(server_rss_allowance));
  if (!sanitized && rss > 2 * values)
    checks.fail("server %zu: peak resident set %.1f MiB is more than twice the %.1f MiB of values it holds", shard,
                as_mib(rss), as_mib(values));
  std::printf("sparse-memory: server %zu (rank %zu): %zu rows, %.1f MiB of values, the shard counts %.1f MiB, "
              "peak RSS %.1f MiB, served for %.1f s\n",
              shard, e.rank(), rows, as_mib(values), as_mib(counted), as_mib(rss),
              static_cast<double>(millis.count()) / 1000);
  std::fflush(stdout);
  return Report{e.rank(), 1, checks.failed == 0, rss, rows, counted, 0, static_cast<std::uint64_t>(millis.count())};
}

template <class E>
Report train(E& e, std::size_t workers, Checks& checks) {
  const std::size_t w = e.rank();
  const auto range = range_of(w, workers);
  const fl::sparse::TableSpec spec = table_spec();
  fl::sparse::RowClient<fl::codec::Fp32> client({dim}, workers, servers);
  std::vector<std::uint64_t> keys;
  std::vector<float> rows;
  std::uint64_t steps = 0, keys_moved = 0, wrong = 0;
  const auto start = std::chrono::steady_clock::now();
  for (std::uint64_t first = range.first; first < range.second; first += step_keys, ++steps) {
    const std::uint64_t n = std::min<std::uint64_t>(step_keys, range.second - first);
    keys.resize(n);
    std::iota(keys.begin(), keys.end(), first);
    rows.resize(n * dim);
    client.pull(e, 0, steps, keys, rows);
    // Every key is new: its row must hold its initial values.
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < dim; ++j)
        wrong += rows[i * dim + j] != fl::sparse::initial_row_value(spec.seed, spec.id, keys[i], j, spec.init_scale);
    client.push(e, 0, steps, keys, rows);
    keys_moved += n;
  }
  if (wrong != 0) checks.fail("worker %zu: %" PRIu64 " pulled values differ from their rows' initial values", w, wrong);

  // One SGD step with the row as its gradient and a rate of 1/2 halves the row, exactly.
  const auto sample = sample_of(range);
  rows.resize(sample.size() * dim);
  client.pull(e, 0, steps, sample, rows);
  std::uint64_t unhalved = 0;
  for (std::size_t i = 0; i < sample.size(); ++i)
    for (std::size_t j = 0; j < dim; ++j)
      if (rows[i * dim + j] != 0.5f * fl::sparse::initial_row_value(spec.seed, spec.id, sample[i], j, spec.init_scale))
        ++unhalved;
  if (unhalved != 0)
    checks.fail("worker %zu: %" PRIu64 " values of %zu sampled rows are not half their initial values", w, unhalved,
                sample.size());
  client.done(e);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);

  // The formula of docs/sparse.md, "Bytes per step": every request sends each server a header
  // (done too), every pull gets one back from each; keys go up with pulls and pushes, values down
  // with pulls and up with pushes.
  constexpr std::uint64_t H = fl::sparse::detail::RowHeader::size, K = fl::sparse::detail::key_bytes;
  const std::uint64_t pulls = steps + 1, pushes = steps, pulled = keys_moved + sample.size(), pushed = keys_moved;
  fl::sparse::RowTraffic want;
  want.header_bytes_sent = (pulls + pushes + 1) * servers * H;
  want.header_bytes_received = pulls * servers * H;
  want.key_bytes_sent = (pulled + pushed) * K;
  want.value_bytes_sent = pushed * dim * sizeof(float);
  want.value_bytes_received = pulled * dim * sizeof(float);
  const auto& got = client.traffic();
  if (!(got == want))
    checks.fail("worker %zu: traffic (headers %" PRIu64 "/%" PRIu64 ", keys %" PRIu64 ", values %" PRIu64 "/%" PRIu64
                " bytes sent/received) differs from the formula's (%" PRIu64 "/%" PRIu64 ", %" PRIu64 ", %" PRIu64
                "/%" PRIu64 ")",
                w, got.header_bytes_sent, got.header_bytes_received, got.key_bytes_sent, got.value_bytes_sent,
                got.value_bytes_received, want.header_bytes_sent, want.header_bytes_received, want.key_bytes_sent,
                want.value_bytes_sent, want.value_bytes_received);

  const std::size_t rss = peak_rss();
  if (!sanitized && rss >= worker_rss_bound)
    checks.fail("worker %zu: peak resident set %.1f MiB, the bound is %.0f MiB (a worker holds one step's rows)", w,
                as_mib(rss), as_mib(worker_rss_bound));
  std::printf("sparse-memory: worker %zu: %" PRIu64 " keys in %" PRIu64 " steps, sent %" PRIu64
              " bytes, received %" PRIu64 " bytes, peak RSS %.1f MiB, %.1f s\n",
              w, keys_moved, steps, got.bytes_sent(), got.bytes_received(), as_mib(rss),
              static_cast<double>(millis.count()) / 1000);
  std::fflush(stdout);
  return Report{e.rank(), 0, checks.failed == 0, rss, keys_moved, got.bytes_sent(), got.bytes_received(),
                static_cast<std::uint64_t>(millis.count())};
}

/// Rank 0's line: every process's figures, and the longest time one of them took.
std::string summary(const std::vector<Report>& reports, std::size_t workers) {
  std::string line = "sparse-memory: 2^" + std::to_string(keys_log2) + " rows x " + std::to_string(dim) + " floats (" +
                     std::to_string(keys_total * dim * sizeof(float) / mib) + " MiB) over " + std::to_string(servers) +
                     " servers, " + std::to_string(workers) + " worker(s):";
  char buffer[256];
  std::uint64_t slowest = 0;
  for (const auto& r : reports) {
    slowest = std::max(slowest, r.millis);
    const char* failed = r.ok ? "" : " FAILED";
    if (r.server)
      std::snprintf(buffer, sizeof buffer,
                    " | server rank %" PRIu64 ": %" PRIu64 " rows, RSS %.0f MiB (values %.0f MiB)%s",
                    r.rank, r.rows, as_mib(r.peak_rss), as_mib(r.rows * dim * sizeof(float)), failed);
    else
      std::snprintf(buffer, sizeof buffer,
                    " | worker rank %" PRIu64 ": %" PRIu64 " keys, %.0f MiB sent, %.0f MiB received, RSS %.1f MiB%s",
                    r.rank, r.rows, as_mib(r.bytes), as_mib(r.received), as_mib(r.peak_rss), failed);
    line += buffer;
  }
  std::snprintf(buffer, sizeof buffer, " | %.1f s", static_cast<double>(slowest) / 1000);
  return line + buffer;
}

}  // namespace

int run(const Program& self, int argc, char** /*argv*/) {
  if (argc != 1) {
    std::fprintf(stderr, "usage: flotilla-launch -n 5|6 -- %s\n", self.name().c_str());
    return 2;
  }
  const auto options = fl::transport::TcpOptions::from_environment();
  if (options.world_size != servers + 1 && options.world_size != servers + 2) {
    std::fprintf(stderr, "sparse-memory: %zu ranks; the test runs 1 or 2 workers beside %zu servers (5 or 6 ranks)\n",
                 options.world_size, servers);
    return 2;
  }
  const std::size_t workers = options.world_size - servers;
  Checks checks{options.rank};
  bool all_ok = true;
  try {
    fl::transport::Tcp::run(options, 0, [&](fl::transport::TcpEndpoint& e) {
      const Report mine = e.rank() < workers ? train(e, workers, checks) : serve(e, workers, checks);
      if (e.rank() != 0) {
        const auto bytes = mine.encode();
        e.send(0, report_tag, bytes);
        return;
      }
      std::vector<Report> reports{mine};
      for (std::size_t r = 1; r < e.size(); ++r) {
        std::array<std::byte, Report::size> in{};
        e.recv(r, report_tag, in);
        reports.push_back(Report::decode(in));
      }
      all_ok = std::all_of(reports.begin(), reports.end(), [](const Report& r) { return r.ok != 0; });
      const std::string line = summary(reports, workers);
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparse-memory: rank %zu: %s\n", options.rank, e.what());
    return 1;
  }
  return checks.failed == 0 && all_ok ? 0 : 1;
}

}  // namespace flotilla_test::sparse_memory
