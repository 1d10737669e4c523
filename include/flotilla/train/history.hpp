#pragma once
// What a training run records once per epoch. The Trainer fills one EpochRecord at the end of each
// epoch; MetricsLog writes it to disk, write_svg_plot draws a History of them.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace flotilla {

/// One epoch's summary. Losses are means over the epoch's samples; accuracies are fractions in
/// [0, 1]. Validation values are empty on epochs that were not validated, so that a log can tell
/// "not measured" from a measured 0.
struct EpochRecord {
  std::uint64_t epoch = 0;  ///< 1-based number of the epoch just finished
  std::uint64_t step = 0;   ///< optimizer steps taken since the start of the run (not the epoch)
  double train_loss = 0;
  double train_accuracy = 0;
  std::optional<double> val_loss, val_accuracy;
  double samples_per_second = 0;  ///< training throughput of this epoch, all workers together
  double seconds = 0;             ///< wall time of this epoch, validation included
  double learning_rate = 0;       ///< at the end of the epoch (schedules change it step by step)
  /// Further named values (gradient norm, a custom metric). Names must not repeat within a record
  /// nor reuse one of the fields above; MetricsLog writes them as extra keys / columns in order.
  std::vector<std::pair<std::string, double>> extra;
};

/// Every epoch of a run, oldest first.
using History = std::vector<EpochRecord>;

}  // namespace flotilla
