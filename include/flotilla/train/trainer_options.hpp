// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_TRAINEROPTIONS_HPP_INCLUDED
#define FLOTILLA_TRAIN_TRAINEROPTIONS_HPP_INCLUDED
// TrainerOptions: how the data-parallel Trainer is set up, on top of what every trainer shares
// (train/training_options.hpp): workers, servers, cores per worker, and how communication
// overlaps backward.
#include <cstddef>
#include <limits>

#include "flotilla/train/non_finite_loss.hpp"
#include "flotilla/train/overlap.hpp"
#include "flotilla/train/training_options.hpp"
#include "flotilla/train/worker_loss.hpp"

namespace flotilla {

/// A worker made artificially slow, to study stragglers: after computing each step's gradients it
/// sleeps (factor - 1) times as long as the computation took.
struct Straggler {
  std::size_t worker = std::numeric_limits<std::size_t>::max();
  double factor = 1.0;
};

template <ModelType M>
struct TrainerOptions : TrainingOptions<M> {
  /// Cores of each worker that share its batch. Results are the same for any value up to float
  /// rounding of the gradient sum (and bit for bit for a fixed value).
  std::size_t threads = 1;
  /// In-process jobs: the number of worker threads. Other backends take the number of workers from
  /// the launched job (its size less the servers); a non-zero value here must then agree with it.
  std::size_t workers = 1;
  /// Parameter-server topologies: the number of server ranks (each holds one shard).
  std::size_t servers = 1;
  /// Layers that can (Dense: StreamsGradients) report parts of their gradient while backward is
  /// still computing the rest, so that a large layer's first buckets go on the wire early. It pays
  /// only where the gradients go over sockets and the communication thread has a core to itself;
  /// with no spare core it costs more than it hides (docs/benchmarks.md, "Streaming
  /// gradients"), hence off.
  bool stream_gradients = false;
  /// Whether gradient buckets (ring) or shard pushes (parameter servers) go out during backward, on
  /// a thread of the worker's own, or all after it, on the training thread (train/overlap.hpp).
  /// Overlap hides communication where that thread has a core to itself; where every core
  /// computes, it takes turns with backward and costs more than it hides (docs/benchmarks.md,
  /// "Communication overlap").
  /// `automatic` overlaps when the cores this process may use outnumber the compute threads of the
  /// ranks on this host.
  Overlap overlap = Overlap::automatic;
  /// For experiments with slow workers.
  Straggler straggler{};
  /// When a worker dies or stalls (train/worker_loss.hpp): by default asynchronous and
  /// bounded-staleness training go on without it, synchronous training stops with an error naming
  /// it; continue_with_survivors makes synchronous training go on too (transport::Tcp only).
  WorkerLoss on_worker_loss = WorkerLoss::by_policy;
  /// When an update's gradient or a batch's loss is not a finite number (train/non_finite_loss.hpp):
  /// stop with DivergenceError (the default), or skip that update and go on. Skipping needs the
  /// workers to see one gradient: peer-to-peer policies that allreduce it in backward
  /// (policy::Synchronous<>, Accumulate, Compressed), or one worker.
  NonFiniteLoss on_non_finite_loss = NonFiniteLoss::stop;
  /// With NonFiniteLoss::skip_update: this many skipped updates in a row stop training.
  std::size_t max_consecutive_skips = 10;
};

}  // namespace flotilla
#endif  // FLOTILLA_TRAIN_TRAINEROPTIONS_HPP_INCLUDED
