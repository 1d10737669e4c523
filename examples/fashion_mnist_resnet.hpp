// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The residual network of fashion_mnist_resnet.cpp, shared with the training benchmark
// (bench/train): He et al.'s CIFAR ResNet shape on 28 x 28 images. A 3 x 3 stem, three stages of
// basic residual blocks (16, 32 and 64 channels at 28 x 28, 14 x 14 and 7 x 7; the first block of
// the later stages halves the size with stride 2 and a projection shortcut), global average
// pooling and one Dense layer.
#pragma once

#include <flotilla/flotilla.hpp>

#include <cstddef>
#include <type_traits>

namespace example::resnet {

namespace fl = flotilla;

/// He et al.'s basic block: 3 x 3 convolution (stride S), normalisation, ReLU, 3 x 3 convolution,
/// normalisation; added to the shortcut, then ReLU.
template <class Norm, std::size_t F, std::size_t S, class Shortcut>
using Basic = fl::Block<fl::Residual<fl::Block<fl::Conv2D<F, 3, S, 1>, Norm, fl::ReLU, fl::Conv2D<F, 3, 1, 1>, Norm>, Shortcut>,
                        fl::ReLU>;

/// A stage of N blocks with F channels; the first with stride S (and a projection when S > 1).
template <class Norm, std::size_t F, std::size_t S, std::size_t N>
using Stage = fl::Block<Basic<Norm, F, S, std::conditional_t<S == 1, fl::Identity, fl::Project>>,
                        fl::Repeat<N - 1, Basic<Norm, F, 1, fl::Identity>>>;

/// The network, with `Norm` its normalisation layer (BatchNorm2D<> or SyncBatchNorm2D).
template <class Norm>
using Net = fl::Sequential<fl::Input<1, 28, 28>,                      //
                           fl::Conv2D<16, 3, 1, 1>, Norm, fl::ReLU,  // stem: 16 x 28 x 28
                           Stage<Norm, 16, 1, 2>,                    // 16 x 28 x 28
                           Stage<Norm, 32, 2, 2>,                    // 32 x 14 x 14
                           Stage<Norm, 64, 2, 2>,                    // 64 x 7 x 7
                           fl::GlobalAvgPool, fl::Dense<10>>;

}  // namespace example::resnet
