#pragma once
// The error a trainer raises when a batch's loss is not a finite number: training has diverged,
// and every update from there on would carry the NaN or infinity into the parameters.
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>

#include "flotilla/core/error.hpp"

namespace flotilla::detail {

/// DivergenceError for `who` (e.g. "worker 0", "stage 2 of replica 0") at update `update` (1
/// first), batch `batch` (0 first) of `batches` in epoch `epoch` (0 first), whose rate was `rate`.
inline DivergenceError divergence(const std::string& who, double loss, std::uint64_t update, std::uint64_t epoch,
                                  std::uint64_t batch, std::uint64_t batches, double rate) {
  std::ostringstream m;
  m << who << ": the loss is " << (std::isnan(loss) ? "NaN" : loss > 0 ? "+inf" : "-inf") << " at update " << update
    << " (epoch " << epoch + 1 << ", batch " << batch + 1 << " of " << batches << "): training has diverged. "
    << "The learning rate of that update was " << rate
    << "; a lower one, or inputs scaled to a smaller range, usually avoids this";
  return DivergenceError(m.str(), update);
}

}  // namespace flotilla::detail
