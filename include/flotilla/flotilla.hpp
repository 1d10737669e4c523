// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_FLOTILLA_HPP_INCLUDED
#define FLOTILLA_FLOTILLA_HPP_INCLUDED
// flotilla's umbrella header: `#include <flotilla/flotilla.hpp>` gives the whole library.
//
// It includes every public header under include/flotilla/ (never one under a detail/ folder:
// those are the library's internals, reached through the public headers that use them) except
// the optional ones that need a
// dependency beyond Eigen and the standard library, which you include yourself when you use them:
//   flotilla/transport/tcp*   (sockets)
//   flotilla/transport/mpi*   (an MPI implementation; CMake option FLOTILLA_WITH_MPI)
//   flotilla/cuda/*           (the CUDA toolkit; CMake option FLOTILLA_WITH_CUDA)
// and the testing kits, flotilla/testing/* (checks of users' own layers, losses, codecs, policies
// and transports), which a test includes by name: a training program does not parse them.
// The pattern list lives in tests/cmake/optional_headers.cmake.
//
// Keep this list complete when you add a header: the `umbrella_header_complete` test fails while a
// header exists that this file does not reach (directly or through another header). Then run
// `python3 scripts/amalgamate.py` to regenerate single_include/flotilla.hpp, the single-header
// form of this file (the `single_include_up_to_date` test checks that too).

#include "flotilla/version.hpp"

// Core: shapes, tensor views, random numbers, errors, threads.
#include "flotilla/core/crc32.hpp"
#include "flotilla/core/crc32c.hpp"
#include "flotilla/core/device.hpp"
#include "flotilla/core/element_math.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/gemm.hpp"
#include "flotilla/core/host_device.hpp"
#include "flotilla/core/linkage.hpp"
#include "flotilla/core/log.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/core/shape.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/core/thread_pool.hpp"

// Extension points (concepts).
#include "flotilla/concepts/architecture.hpp"
#include "flotilla/concepts/initializer.hpp"
#include "flotilla/concepts/layer.hpp"
#include "flotilla/concepts/loss.hpp"
#include "flotilla/concepts/optimizer.hpp"
#include "flotilla/concepts/row_optimizer.hpp"
#include "flotilla/concepts/schedule.hpp"
#include "flotilla/concepts/transport.hpp"

// Layers and networks.
#include "flotilla/nn/activation.hpp"
#include "flotilla/nn/avg_pool2d.hpp"
#include "flotilla/nn/batch_norm.hpp"
#include "flotilla/nn/block.hpp"
#include "flotilla/nn/branches.hpp"
#include "flotilla/nn/conv2d.hpp"
#include "flotilla/nn/dense.hpp"
#include "flotilla/nn/dropout.hpp"
#include "flotilla/nn/embedding.hpp"
#include "flotilla/nn/flatten.hpp"
#include "flotilla/nn/global_avg_pool.hpp"
#include "flotilla/nn/init.hpp"
#include "flotilla/nn/layer_cost.hpp"
#include "flotilla/nn/layer_norm.hpp"
#include "flotilla/core/layer_args.hpp"
#include "flotilla/nn/maxpool2d.hpp"
#include "flotilla/nn/network.hpp"
#include "flotilla/nn/residual.hpp"
#include "flotilla/nn/sequential.hpp"
#include "flotilla/nn/summary.hpp"

// Losses.
#include "flotilla/loss/binary_cross_entropy.hpp"
#include "flotilla/loss/mse.hpp"
#include "flotilla/loss/softmax_cross_entropy.hpp"
#include "flotilla/core/targets.hpp"

// Optimizers and learning-rate schedules.
#include "flotilla/optim/adam.hpp"
#include "flotilla/optim/row_adagrad.hpp"
#include "flotilla/optim/row_ftrl.hpp"
#include "flotilla/optim/row_lazy_adam.hpp"
#include "flotilla/optim/row_sgd.hpp"
#include "flotilla/optim/schedule.hpp"
#include "flotilla/optim/sgd.hpp"

// Data sets and their file formats.
#include "flotilla/data/arrays.hpp"
#include "flotilla/data/criteo.hpp"
#include "flotilla/data/csv.hpp"
#include "flotilla/data/ctr_example.hpp"
#include "flotilla/data/ctr_generator.hpp"
#include "flotilla/data/ctr_reader.hpp"
#include "flotilla/data/dataset.hpp"
#include "flotilla/data/fashion_mnist.hpp"
#include "flotilla/data/gzip.hpp"
#include "flotilla/data/gzip_stream.hpp"
#include "flotilla/data/idx.hpp"
#include "flotilla/data/libsvm.hpp"
#include "flotilla/data/line_reader.hpp"
#include "flotilla/data/loader.hpp"
#include "flotilla/data/npy.hpp"
#include "flotilla/data/npz.hpp"

// Models and training.
#include "flotilla/model.hpp"
#include "flotilla/interop/safetensors.hpp"
#include "flotilla/interop/torch.hpp"
#include "flotilla/train/binary_metrics.hpp"
#include "flotilla/train/checkpoint_dir.hpp"
#include "flotilla/train/checkpoint_format.hpp"
#include "flotilla/train/confusion.hpp"
#include "flotilla/train/evaluation.hpp"
#include "flotilla/train/fit_options.hpp"
#include "flotilla/train/history.hpp"
#include "flotilla/train/metrics_log.hpp"
#include "flotilla/train/plot.hpp"
#include "flotilla/train/progress.hpp"
#include "flotilla/train/overlap.hpp"
#include "flotilla/train/trainer.hpp"
#include "flotilla/train/trainer_options.hpp"
#include "flotilla/train/training_options.hpp"
#include "flotilla/train/non_finite_loss.hpp"
#include "flotilla/train/worker_loss.hpp"

#include "flotilla/train/timeline.hpp"

// Distributed training. Transports between ranks (TCP and MPI need their own includes:
// flotilla/transport/tcp.hpp, flotilla/transport/mpi.hpp), the collectives built on any of them,
// what goes on the wire, how workers are arranged, and how their updates combine.
#include "flotilla/concepts/codec.hpp"
#include "flotilla/concepts/transport.hpp"
#include "flotilla/concepts/update_policy.hpp"
#include "flotilla/transport/group.hpp"
#include "flotilla/transport/in_process.hpp"
#include "flotilla/transport/launcher.hpp"
#include "flotilla/transport/operation.hpp"
#include "flotilla/collective/allreduce_small.hpp"
#include "flotilla/collective/broadcast.hpp"
#include "flotilla/collective/ring_allreduce.hpp"
#include "flotilla/collective/sum_tree.hpp"
#include "flotilla/collective/tree_allreduce.hpp"
#include "flotilla/codec/bf16.hpp"
#include "flotilla/codec/error_feedback.hpp"
#include "flotilla/codec/fp16.hpp"
#include "flotilla/codec/fp32.hpp"
#include "flotilla/concepts/gradient_exchange.hpp"
#include "flotilla/exchange/local.hpp"
#include "flotilla/exchange/policy_exchange.hpp"
#include "flotilla/exchange/push_to_servers.hpp"
#include "flotilla/exchange/ring_allreduce.hpp"
#include "flotilla/core/topology.hpp"
#include "flotilla/topology/cost_model.hpp"
#include "flotilla/policy/accumulate.hpp"
#include "flotilla/policy/asynchronous.hpp"
#include "flotilla/policy/compressed.hpp"
#include "flotilla/policy/reproducible.hpp"
#include "flotilla/policy/synchronous.hpp"

// Model-parallel, pipelined training (one network split into stages across ranks).
#include "flotilla/pipeline.hpp"

// Sparse models: embedding rows on parameter servers (click-through prediction).
#include "flotilla/sparse/ctr_model.hpp"
#include "flotilla/sparse/row_client.hpp"
#include "flotilla/sparse/row_server.hpp"
#include "flotilla/sparse/row_table.hpp"
#include "flotilla/sparse/trainer.hpp"

// Command-line flags for training programs.
#include "flotilla/cli/flags.hpp"

#endif  // FLOTILLA_FLOTILLA_HPP_INCLUDED
