// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_SPARSE_CTRMODEL_HPP_INCLUDED
#define FLOTILLA_SPARSE_CTRMODEL_HPP_INCLUDED
// CtrModel: a click-through-rate model as one type. Every categorical field of an example is
// embedded (a row per ID, pooled over the field's IDs) into one table whose rows live on the
// parameter servers; the pooled embeddings and the numeric features, concatenated, feed a dense
// tower (an ordinary Sequential) that ends in the click logit. An optional wide part adds one
// weight per ID, summed over every field, to the logit (the linear half of wide & deep, Cheng et
// al. 2016, trained there, as here by default, with FTRL-Proximal).
//
//   using Model = sparse::CtrModel<sparse::CriteoInputs, Embedding<16>,
//                                  Sequential<Input<26 * 16 + 13>, Dense<64>, ReLU, Dense<1>>,
//                                  optim::RowAdagrad, optim::Adam>;
//
// The shapes are checked when the type is formed: the tower's input must be fields x dim +
// numeric features, its output one logit.
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "flotilla/concepts/architecture.hpp"
#include "flotilla/concepts/optimizer.hpp"
#include "flotilla/concepts/row_optimizer.hpp"
#include "flotilla/nn/embedding.hpp"
#include "flotilla/nn/network.hpp"
#include "flotilla/optim/adam.hpp"
#include "flotilla/optim/row_adagrad.hpp"
#include "flotilla/optim/row_sgd.hpp"

namespace flotilla::sparse {

/// What every example holds: `Categorical` fields of IDs and `Numeric` dense features.
template <std::size_t Categorical, std::size_t Numeric>
struct Inputs {
  static_assert(Categorical > 0, "sparse::Inputs: a click-through model needs at least one categorical field");
  static constexpr std::size_t categorical = Categorical;
  static constexpr std::size_t numeric = Numeric;
};

/// The Criteo display-advertising layout: 26 categorical fields, 13 integer features.
using CriteoInputs = Inputs<26, 13>;

/// No wide part: the logit is the tower's output.
struct NoWide {};

/// A wide part: one weight per ID of every field (a table of one-value rows), summed into the
/// logit, updated by its own row optimizer; `Buckets` as in Embedding.
template <RowOptimizer O, std::uint64_t Buckets = 0>
struct Wide {
  using optimizer = O;
  static constexpr std::uint64_t buckets = Buckets;
};

namespace detail {
template <class W>
inline constexpr bool is_wide = false;
template <class O, std::uint64_t B>
inline constexpr bool is_wide<Wide<O, B>> = true;
template <class W>
struct wide_optimizer_of {
  using type = optim::RowSGD;
};
template <class O, std::uint64_t B>
struct wide_optimizer_of<Wide<O, B>> {
  using type = O;
};
template <class E>
concept EmbeddingSpec = requires {
  { E::dim } -> std::convertible_to<std::size_t>;
  { E::pooling } -> std::convertible_to<Pooling>;
  { E::buckets } -> std::convertible_to<std::uint64_t>;
};
}  // namespace detail

template <class In, class Emb, class Tower, class RowOpt = optim::RowAdagrad, class TowerOpt = optim::Adam,
          class WidePart = NoWide>
struct CtrModel {
  static_assert(detail::EmbeddingSpec<Emb>, "sparse::CtrModel: the second argument must be an Embedding<Dim, Pooling, Buckets>");
  static_assert(Architecture<Tower>,
                "sparse::CtrModel: the tower must be an architecture, Sequential<Input<N>, ..., Dense<1>>");
  static_assert(RowOptimizer<RowOpt>,
                "sparse::CtrModel: the embeddings' optimizer must be a RowOptimizer (optim::RowAdagrad, RowFtrl, RowSGD, RowLazyAdam)");
  static_assert(Optimizer<TowerOpt, float>, "sparse::CtrModel: the tower's optimizer must be an Optimizer (optim::Adam, SGD, ...)");
  static_assert(std::is_same_v<WidePart, NoWide> || detail::is_wide<WidePart>,
                "sparse::CtrModel: the last argument must be NoWide or Wide<RowOptimizer>");

  using inputs = In;
  using embedding = Emb;
  using tower = Tower;
  using network = Network<Tower, float>;
  using row_optimizer_type = RowOpt;
  using tower_optimizer_type = TowerOpt;
  using wide = WidePart;

  static constexpr std::size_t fields = In::categorical;
  static constexpr std::size_t numeric = In::numeric;
  static constexpr std::size_t dim = Emb::dim;
  static constexpr std::size_t tower_inputs = fields * dim + numeric;
  static constexpr bool has_wide = detail::is_wide<WidePart>;

  static_assert(Tower::input_shape::size == tower_inputs,
                "sparse::CtrModel: the tower's Input<N> must take fields x embedding dim + numeric features values "
                "(the pooled embeddings of every field, then the numeric features)");
  static_assert(Tower::output_shape::size == 1, "sparse::CtrModel: the tower must end in one output, the click logit (Dense<1>)");

  RowOpt row_optimizer{};
  TowerOpt tower_optimizer{};
  /// The wide part's optimizer (unused without one).
  typename detail::wide_optimizer_of<WidePart>::type wide_optimizer{};
  /// Embedding rows start uniform in [-init_scale, init_scale], or at zero where the row optimizer
  /// needs it (FTRL); wide weights start at zero.
  float init_scale = 0.05f;
};

}  // namespace flotilla::sparse
#endif  // FLOTILLA_SPARSE_CTRMODEL_HPP_INCLUDED
