// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Click-through prediction on one machine: workers and parameter servers are threads of this
// process (flotilla's embedded default transport). See ctr_common.hpp for the model and the flags.
//
//   ctr                                       generate 2M + 200k lines, train 2 workers x 2 servers
//   ctr --train day_0.gz --test day_1.gz      a Criteo file (plain or gzip)
#include "ctr_common.hpp"

int main(int argc, char** argv) try {
  return example::run<example::InProcessFlags>(argc, argv, "ctr");
} catch (const std::exception& e) {
  std::fprintf(stderr, "ctr: %s\n", e.what());
  return 1;
}
