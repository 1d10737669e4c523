// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_NN_DROPOUT_HPP_INCLUDED
#define FLOTILLA_NN_DROPOUT_HPP_INCLUDED
// Dropout<Num, Den>: in training, zeroes each value with probability Num/Den and scales the rest by
// 1 / (1 - Num/Den) ("inverted" dropout, so evaluation is the identity).
//
// The mask of a sample is a function of the run's seed, the epoch, the layer's position and the
// sample's id in the data set, not of a generator's position: splitting a batch across threads or
// workers draws exactly the same masks as running it whole.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "flotilla/core/random.hpp"
#include "flotilla/core/shape.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/core/layer_args.hpp"

namespace flotilla {

template <std::size_t Num, std::size_t Den = 100>
struct Dropout {
  static_assert(Den > 0, "Dropout<Num, Den>: the denominator must be > 0");
  static_assert(Num < Den, "Dropout<Num, Den>: the drop probability Num/Den must be below 1");

  template <class In, class T>
  struct layer {
    static_assert(AnyShape<In>, "Dropout: input_shape must be a flotilla::Shape");
    using spec = Dropout;  // the spec this layer was bound from (device backends dispatch on it)
    using scalar_type = T;
    using input_shape = In;
    using output_shape = In;
    static constexpr std::string_view name = "Dropout";
    static constexpr std::size_t parameter_count = 0;
    static constexpr double rate = static_cast<double>(Num) / static_cast<double>(Den);

    void forward(const ForwardArgs<T>& a) {
      if (a.mode == Mode::eval || Num == 0) {
        a.output = a.input;
        scale_.resize(0, 0);
        return;
      }
      const auto batch = a.input.cols();
      scale_.resize(a.input.rows(), batch);
      const T keep_scale = static_cast<T>(1.0 / (1.0 - rate));
      for (Eigen::Index s = 0; s < batch; ++s) {
        const std::uint64_t id = a.sample_ids.empty() ? static_cast<std::uint64_t>(s) : a.sample_ids[static_cast<std::size_t>(s)];
        std::uint64_t state = detail::mix(a.noise_key, id);
        for (Eigen::Index j = 0; j < a.input.rows(); ++j) {
          const double u = bits_to_unit<double>(detail::splitmix64(state));
          scale_(j, s) = u < rate ? T(0) : keep_scale;
        }
      }
      a.output = a.input.cwiseProduct(scale_);
    }

    void backward(const BackwardArgs<T>& a) {
      if (!a.wants_input_grad()) return;
      if (scale_.size() == 0) {
        a.input_grad = a.output_grad;
      } else {
        a.input_grad = a.output_grad.cwiseProduct(scale_);
      }
    }

   private:
    Matrix<T> scale_;
  };
};

}  // namespace flotilla
#endif  // FLOTILLA_NN_DROPOUT_HPP_INCLUDED
