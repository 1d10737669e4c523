// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_DETAIL_MODELCHECKPOINT_HPP_INCLUDED
#define FLOTILLA_TRAIN_DETAIL_MODELCHECKPOINT_HPP_INCLUDED
// A trainer's checkpoint of a model: the model's signature (scalar type, each parameter tensor's
// layer, name and size, so that a checkpoint is never loaded into another model), its parameters
// and optimizer state in the unsplit model's flat layout, the step, the seed and the data
// position. flotilla::Trainer and pipeline::Trainer both write and read it through here, so each
// loads what the other saved.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/model.hpp"
#include "flotilla/train/checkpoint_format.hpp"

namespace flotilla::detail {

template <ModelType M>
std::string model_signature() {
  using T = typename M::scalar_type;
  std::string s = std::string(sizeof(T) == 4 ? "float32" : "float64") + " " + std::to_string(M::parameter_count) + ":";
  for (const auto& t : M::network::tensors) {
    // Appended piece by piece: GCC 12 misreports chains of operator+ on temporaries (-Wrestrict).
    s += ' ';
    s += std::to_string(t.layer);
    s += '.';
    s += t.layer_name;
    s += '.';
    s += t.name;
    s += '[';
    s += std::to_string(t.size);
    s += ']';
  }
  return s;
}

/// Where a run stands: what a checkpoint stores besides the arrays.
struct RunPosition {
  std::uint64_t step = 0;
  std::uint64_t epoch = 0;
  std::uint64_t batch_in_epoch = 0;
  std::uint64_t seed = 0;
};

/// The records that say which model and optimizer a checkpoint file is of (what check_checkpoint()
/// compares): every file a trainer writes begins with them.
template <ModelType M>
void add_model_records(checkpoint::Writer& w) {
  w.add_string("model", model_signature<M>());
  w.add_string("optimizer", std::string(M::optimizer::name));
}

/// The records of where the run stood, and their reading back.
inline void add_position_records(checkpoint::Writer& w, const RunPosition& at) {
  w.add_u64("step", at.step);
  w.add_u64("epoch", at.epoch);
  w.add_u64("batch_in_epoch", at.batch_in_epoch);
  w.add_u64("seed", at.seed);
}
inline RunPosition read_position(const checkpoint::Reader& r) {
  return {r.u64("step"), r.u64("epoch"), r.u64("batch_in_epoch"), r.u64("seed")};
}

/// The state of each worker's gradient exchange (StatefulExchange: error-feedback residuals), by
/// worker, then buffer; a worker whose state is not known holds no buffers.
template <class T>
using ExchangeStates = std::vector<std::vector<std::vector<T>>>;

/// Writes `path` atomically. `optimizer` holds the optimizer's buffers over the whole model, or
/// is null where the state is elsewhere (parameter servers in another process); `exchange` the
/// workers' exchange states, where the exchange keeps any.
template <ModelType M>
void write_checkpoint(const std::filesystem::path& path, std::span<const typename M::scalar_type> parameters,
                      const std::vector<std::span<const typename M::scalar_type>>* optimizer, const RunPosition& at,
                      const ExchangeStates<typename M::scalar_type>* exchange = nullptr) {
  using T = typename M::scalar_type;
  checkpoint::Writer w;
  add_model_records<M>(w);
  add_position_records(w, at);
  w.add_array<T>("parameters", parameters);
  w.add_u64("has_optimizer_state", optimizer ? 1 : 0);
  if (optimizer)
    for (std::size_t i = 0; i < optimizer->size(); ++i) w.add_array<T>("optimizer." + std::to_string(i), (*optimizer)[i]);
  if (exchange && !exchange->empty()) {
    w.add_u64("exchange.workers", exchange->size());
    for (std::size_t k = 0; k < exchange->size(); ++k) {
      const std::string prefix = "exchange." + std::to_string(k);
      w.add_u64(prefix + ".buffers", (*exchange)[k].size());
      for (std::size_t i = 0; i < (*exchange)[k].size(); ++i)
        w.add_array<T>(prefix + "." + std::to_string(i), std::span<const T>((*exchange)[k][i]));
    }
  }
  w.commit(path);
}

/// What read_checkpoint() found; the optimizer state is zero where none was saved.
template <ModelType M>
struct LoadedCheckpoint {
  std::vector<typename M::scalar_type> parameters;
  typename M::optimizer::template state<typename M::scalar_type> optimizer;
  bool has_optimizer_state = true;
  RunPosition at;
  ExchangeStates<typename M::scalar_type> exchange;
};

/// Checks that `r` holds a checkpoint of M with M's optimizer: CheckpointError naming the file and
/// what differs otherwise.
template <ModelType M>
void check_checkpoint(const checkpoint::Reader& r) {
  const std::string model = r.string("model");
  if (model != model_signature<M>())
    throw CheckpointError(r.source() + ": the checkpoint is of another model.\n  checkpoint: " + model +
                          "\n  this model: " + model_signature<M>());
  const std::string opt = r.string("optimizer");
  if (opt != M::optimizer::name)
    throw CheckpointError(r.source() + ": the checkpoint's optimizer is " + opt + ", this trainer uses " +
                          std::string(M::optimizer::name));
}

/// Reads a checkpoint of M that check_checkpoint() accepted.
template <ModelType M>
LoadedCheckpoint<M> read_checkpoint(const checkpoint::Reader& r) {
  using T = typename M::scalar_type;
  check_checkpoint<M>(r);
  LoadedCheckpoint<M> c{std::vector<T>(M::parameter_count), typename M::optimizer::template state<T>(M::parameter_count), true, {}, {}};
  r.array_into<T>("parameters", std::span<T>(c.parameters));
  c.has_optimizer_state = !r.has("has_optimizer_state") || r.u64("has_optimizer_state") != 0;
  if (c.has_optimizer_state) {
    auto buffers = c.optimizer.buffers();
    for (std::size_t i = 0; i < buffers.size(); ++i) r.array_into<T>("optimizer." + std::to_string(i), buffers[i]);
  }
  c.at = read_position(r);
  if (r.has("exchange.workers")) {
    // Counts come from the file: each is checked against the records there before it is used, so
    // a damaged count is an error naming the record, never an allocation of its size.
    auto need = [&](const std::string& name) {
      if (!r.has(name))
        throw CheckpointError(r.source() + ": the exchange state lacks record '" + name + "' that its counts announce");
    };
    const std::uint64_t workers = r.u64("exchange.workers");
    for (std::uint64_t k = 0; k < workers; ++k) {
      const std::string prefix = "exchange." + std::to_string(k);
      need(prefix + ".buffers");
      const std::uint64_t count = r.u64(prefix + ".buffers");
      std::vector<std::vector<T>> buffers;
      for (std::uint64_t i = 0; i < count; ++i) {
        const std::string name = prefix + "." + std::to_string(i);
        need(name);
        buffers.emplace_back(r.count(name));
        r.array_into<T>(name, std::span<T>(buffers.back()));
      }
      c.exchange.push_back(std::move(buffers));
    }
  }
  return c;
}

/// Reads and verifies the checkpoint file `path` of M.
template <ModelType M>
LoadedCheckpoint<M> read_checkpoint(const std::filesystem::path& path) {
  return read_checkpoint<M>(checkpoint::Reader(path));
}

}  // namespace flotilla::detail
#endif  // FLOTILLA_TRAIN_DETAIL_MODELCHECKPOINT_HPP_INCLUDED
