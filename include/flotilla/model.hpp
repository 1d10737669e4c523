// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_MODEL_HPP_INCLUDED
#define FLOTILLA_MODEL_HPP_INCLUDED
// Model<Net, Loss, Optimizer, T, Device>: the compile-time composition of what is trained (an
// architecture), what it is scored by (a loss), how its parameters move (an optimizer), in which
// scalar type, and on which device (core/device.hpp: device::Cpu by default, device::Cuda).
// It holds no data; Trainer instantiates it. A composition that cannot work is rejected here with
// a message that points to the concept's documentation.
#include <cstddef>
#include <type_traits>

#include "flotilla/concepts/architecture.hpp"
#include "flotilla/concepts/loss.hpp"
#include "flotilla/concepts/optimizer.hpp"
#include "flotilla/core/device.hpp"
#include "flotilla/nn/network.hpp"

namespace flotilla {

template <class Net, class LossT, class Opt, class T = float, class Device = device::Cpu>
struct Model {
  static_assert(std::is_floating_point_v<T>, "Model<Net, Loss, Optimizer, T>: T must be float or double");
  static_assert(Architecture<Net>,
                "Model<Net, Loss, Optimizer>: Net is not a network architecture; write Sequential<Input<...>, Layers...>");
  static_assert(Loss<LossT, T>,
                "Model<Net, Loss, Optimizer>: the second argument is not a Loss (see docs/concepts/loss.md); "
                "built-in: SoftmaxCrossEntropy, MSE");
  static_assert(Optimizer<Opt, T>,
                "Model<Net, Loss, Optimizer>: the third argument is not an Optimizer (see docs/concepts/optimizer.md); "
                "built-in: optim::SGD, optim::Momentum, optim::Adam, optim::AdamW");
  static_assert(LossT::target != TargetKind::labels || Net::output_shape::rank == 1,
                "Model<Net, Loss, Optimizer>: a classification loss needs a vector output (one score per class); "
                "end the network with Flatten and Dense<classes>");
  static_assert(std::is_same_v<Device, device::Cpu> || std::is_same_v<Device, device::Cuda>,
                "Model<Net, Loss, Optimizer, T, Device>: Device must be device::Cpu or device::Cuda");
  static_assert(std::is_same_v<Device, device::Cpu> || std::is_same_v<T, float>,
                "Model<..., device::Cuda>: the CUDA backend computes in float; use T = float");

  using architecture = Net;
  using loss = LossT;
  using optimizer = Opt;
  using scalar_type = T;
  using device = Device;
  using network = Network<Net, T>;
  using input_shape = typename Net::input_shape;
  using output_shape = typename Net::output_shape;
  static constexpr std::size_t parameter_count = network::parameter_count;
};

namespace detail {
template <class M>
struct is_model : std::false_type {};
template <class N, class L, class O, class T, class D>
struct is_model<Model<N, L, O, T, D>> : std::true_type {};
}  // namespace detail

/// A Model<...> type.
template <class M>
concept ModelType = detail::is_model<M>::value;

}  // namespace flotilla
#endif  // FLOTILLA_MODEL_HPP_INCLUDED
