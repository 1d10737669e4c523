// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The cost model: its counts for each exchange, and fit() recovering the prices that made them.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "flotilla/core/random.hpp"
#include "flotilla/topology/cost_model.hpp"

namespace unit_cost_model {

using namespace flotilla::cost;

TEST_CASE("cost model: the design's arithmetic, and the counts of each exchange") {
  // 1 GB of parameters, 10 workers, one server: 10 GB of replies out of the server's link, then
  // the last worker's next 1 GB push through its own; at 10 Gbit/s 8.8 s however short the messages.
  const Payload gigabyte{250e6, 4, 1};
  const Prices ten_gbe{0, 8 / 10e9, 0};
  CHECK(seconds({Exchange::parameter_servers, 10, 1, 1}, gigabyte, ten_gbe) == doctest::Approx(8.8));
  // Sharded over 10 servers a worker's link carries its 1 GB each way: 1.6 s.
  CHECK(seconds({Exchange::parameter_servers, 10, 1, 10}, gigabyte, ten_gbe) == doctest::Approx(1.6));
  // The ring: 2(N-1)/N of the buffer through every link, 1.44 s for 10 workers.
  CHECK(seconds({Exchange::ring, 10, 1, 0}, gigabyte, ten_gbe) == doctest::Approx(1.44));
  // Hierarchical, 5 hosts of 2: 2(H-1)/H = 1.6 of the buffer... of 1 GB, at 10 Gbit/s 1.28 s.
  CHECK(seconds({Exchange::hierarchical, 10, 2, 0}, gigabyte, ten_gbe) == doctest::Approx(1.28));
  const Terms ring = terms({Exchange::ring, 4, 1, 0}, {1000, 2, 3});
  CHECK(ring.messages == 18);
  CHECK(ring.link_bytes == doctest::Approx(1.5 * 2000));
  CHECK(ring.local_bytes == doctest::Approx(1.5 * 4000));
  const Terms ps = terms({Exchange::parameter_servers, 4, 1, 2}, {1000, 2, 7});
  CHECK(ps.messages == 8);
  CHECK(ps.link_bytes == doctest::Approx(3 * 2000));
  CHECK(ps.local_bytes == doctest::Approx(3 * 4000));
  CHECK_THROWS_AS(terms({Exchange::hierarchical, 5, 2, 0}, gigabyte), flotilla::ConfigError);
  CHECK_THROWS_AS(terms({Exchange::parameter_servers, 4, 1, 0}, gigabyte), flotilla::ConfigError);
}

TEST_CASE("cost model: fit() finds the prices of steps that follow the model, and nearly so with noise") {
  const Prices truth{60e-6, 1.0 / 60e6, 0.4e-9};
  std::vector<Measurement> exact, noisy;
  flotilla::Generator g(3);
  for (const double mib : {1.0, 4.0, 16.0, 64.0})
    for (const std::size_t n : {2u, 4u, 8u}) {
      const Payload p{mib * 262144, 4, std::ceil(mib * 4)};
      for (const Layout l : {Layout{Exchange::ring, n, 1, 0}, Layout{Exchange::hierarchical, n, 2, 0},
                             Layout{Exchange::parameter_servers, n, 1, 1}, Layout{Exchange::parameter_servers, n, 1, 2}}) {
        const Terms t = terms(l, p);
        exact.push_back({t, seconds(t, truth)});
        noisy.push_back({t, seconds(t, truth) * (1 + g.uniform(-0.05, 0.05))});
      }
    }
  const Prices found = fit(exact);
  CHECK(found.alpha == doctest::Approx(truth.alpha).epsilon(1e-6));
  CHECK(found.beta == doctest::Approx(truth.beta).epsilon(1e-6));
  CHECK(found.gamma == doctest::Approx(truth.gamma).epsilon(1e-6));
  const Prices rough = fit(noisy);
  CHECK(rough.beta == doctest::Approx(truth.beta).epsilon(0.05));
  for (const auto& m : noisy) CHECK(std::abs(seconds(m.terms, rough) / m.seconds - 1) < 0.12);
  // A price the points cannot see is zero, not negative.
  std::vector<Measurement> bandwidth_only;
  for (const auto& m : exact)
    if (m.terms.link_bytes > 0) bandwidth_only.push_back({{0, m.terms.link_bytes, 0}, m.terms.link_bytes * truth.beta});
  const Prices only = fit(bandwidth_only);
  CHECK(only.alpha == 0);
  CHECK(only.gamma == 0);
  CHECK(only.beta == doctest::Approx(truth.beta));
  CHECK_THROWS_AS(fit(std::vector<Measurement>{}), flotilla::ConfigError);
  CHECK_THROWS_AS(fit(std::vector<Measurement>{{{1, 1, 1}, 0}}), flotilla::ConfigError);
}

}  // namespace unit_cost_model
