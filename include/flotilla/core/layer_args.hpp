#pragma once
// What a layer receives in forward and backward, and how it describes its parameter tensors.
// The Layer concept (concepts/layer.hpp) is written in terms of these types.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <type_traits>

#include "flotilla/core/tensor.hpp"

namespace flotilla {

/// Training enables stochastic layers (Dropout); evaluation makes every layer deterministic.
enum class Mode { train, eval };

/// What a parameter tensor is for. Optimizers may treat them differently (no decay on biases).
enum class TensorRole { weight, bias, other };

/// One parameter tensor of a layer, as the layer declares it.
struct TensorSpec {
  std::string_view name;
  std::size_t size;
  TensorRole role = TensorRole::weight;
};

/// One parameter tensor's place in a flat buffer: what a network tells optimizers and policies.
/// Offsets are relative to the start of the buffer (or shard) that is passed along with it.
struct TensorInfo {
  std::size_t layer = 0;        ///< index of the owning layer in the network
  std::string_view layer_name;  ///< e.g. "Dense"
  std::string_view name;        ///< e.g. "weight"
  std::size_t offset = 0;       ///< first element
  std::size_t size = 0;         ///< number of elements
  TensorRole role = TensorRole::weight;
};

/// Arguments of Layer::forward. `input` and `output` are (features x batch), one sample a column.
template <class T>
struct ForwardArgs {
  ConstMatrixView<T> input;
  /// Written by the layer (mutable: the view is const, the values it shows are not).
  mutable MatrixView<T> output;
  /// This layer's slice of the flat parameter buffer (empty when it has no parameters).
  std::span<const T> params;
  Mode mode = Mode::eval;
  /// A stable id per sample (its index in the data set), so that per-sample randomness is the same
  /// however the batch was split across threads and workers. Never empty when called by Network.
  std::span<const std::uint64_t> sample_ids;
  /// Key for per-sample randomness: mixes the run's seed, the epoch and the layer's position.
  std::uint64_t noise_key = 0;
};

/// Arguments of Layer::backward. The layer adds d(loss)/d(params) into `param_grads` (gradients
/// accumulate, so micro-batches can be summed), and writes d(loss)/d(input) into `input_grad`
/// unless it is empty (the first layer's input needs no gradient).
template <class T>
struct BackwardArgs {
  ConstMatrixView<T> input;
  ConstMatrixView<T> output;
  ConstMatrixView<T> output_grad;
  mutable MatrixView<T> input_grad;
  std::span<const T> params;
  std::span<T> param_grads;

  bool wants_input_grad() const noexcept { return input_grad.data() != nullptr; }
};

/// What a layer's optional second backward, `backward(args, final_from)`, is given: calling
/// `final_from(offset)` says that `args.param_grads[offset, end)` will not change again in this
/// backward, so that whoever waits for them (a gradient bucket's allreduce, a parameter-server
/// push) can start before the layer returns. Offsets are relative to the layer's slice and must
/// decrease from call to call; what a layer never reports is reported when its backward returns.
/// A non-owning reference to a callable: cheap to copy, valid for the duration of the call.
class GradientProgress {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, GradientProgress> && std::is_invocable_v<F&, std::size_t>)
  explicit GradientProgress(F& f) noexcept
      : target_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* target, std::size_t offset) { (*static_cast<F*>(target))(offset); }) {}

  void operator()(std::size_t offset) const { call_(target_, offset); }

 private:
  void* target_;
  void (*call_)(void*, std::size_t);
};

}  // namespace flotilla
