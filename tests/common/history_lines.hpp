// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
// For the parameter-server trainer recovery tests (ps_trainer_recovery.cpp, ps_trainer_rejoin.cpp):
// each rank prints its training history as lines a driver can read back from its output
// ("history epoch=2 loss=0.41 val_loss=0.45 val_accuracy=0.84 workers=2"), and the driver checks
// that a surviving worker trained as it should have.
#include <cstdio>
#include <string>
#include <vector>

#include "flotilla/train/history.hpp"
#include "recovery_job.hpp"

namespace flotilla_test {

/// Prints a "history ..." line per epoch; `workers` is the count of workers the epoch ended with.
/// Every number in full precision: the drivers compare the lines of different ranks as text.
inline void print_history(const flotilla::History& history) {
  for (const auto& r : history) {
    double live = 0;
    for (const auto& [k, v] : r.extra)
      if (k == "workers") live = v;
    std::printf("history epoch=%llu loss=%.9g val_loss=%.9g val_accuracy=%.6f workers=%g\n",
                static_cast<unsigned long long>(r.epoch), r.train_loss, r.val_loss.value_or(-1), r.val_accuracy.value_or(-1),
                live);
  }
}

/// The history lines worker `worker` printed in `out`, checked: `epochs` of them, a sane
/// validation accuracy (over 70% on Fashion-MNIST's ten classes: guessing scores 10%), a loss
/// that went down. How many workers the last epoch should count is the caller's to check.
inline std::vector<std::string> checked_history(Checks& check, const std::string& out, std::size_t worker,
                                                std::size_t epochs) {
  const std::string who = "worker " + std::to_string(worker);
  const auto h = lines_with(out, "history ");
  check.expect(h.size() == epochs, who + " should report " + std::to_string(epochs) + " epochs");
  if (h.size() != epochs) return h;
  const double accuracy = field(h.back(), "val_accuracy");
  check.expect(accuracy > 0.70, who + ": validation accuracy " + std::to_string(accuracy) + " is not sane (expected > 0.70)");
  check.expect(field(h.back(), "loss") < field(h.front(), "loss"), who + ": the loss should go down");
  return h;
}

}  // namespace flotilla_test
