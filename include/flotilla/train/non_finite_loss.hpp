// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_NONFINITELOSS_HPP_INCLUDED
#define FLOTILLA_TRAIN_NONFINITELOSS_HPP_INCLUDED
// TrainerOptions::on_non_finite_loss: what the workers do when an update's gradient, or a batch's
// loss, is not a finite number (a batch with a corrupt sample, an overflow in one step, or
// training that has diverged for good).
namespace flotilla {

enum class NonFiniteLoss {
  /// Training stops with DivergenceError naming the worker, the update, the epoch and batch, and
  /// the learning rate. Every update after it would carry the NaN or infinity into the parameters.
  stop,
  /// The update whose gradient (as exchanged: the same on every worker) is not finite is skipped:
  /// parameters and optimizer state stay as they were, the update's number is spent (the schedule
  /// moves on), and training goes on with the next batch. Each skip is logged and counted
  /// (Trainer::skipped_updates(), "skipped_updates" in each epoch's record); a batch whose loss is
  /// not finite is left out of the epoch's loss and accuracy. After
  /// TrainerOptions::max_consecutive_skips skipped updates in a row, training stops with
  /// DivergenceError as with `stop`: nothing finite is coming back.
  skip_update,
};

}  // namespace flotilla
#endif  // FLOTILLA_TRAIN_NONFINITELOSS_HPP_INCLUDED
