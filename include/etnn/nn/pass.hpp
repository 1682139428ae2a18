#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// What a layer's forward and backward see besides its parameters and activations. Program (the
// network executor) fills one per layer and call; backward gets the same values its forward had.
#include <cstddef>
#include <cstdint>

#include "../dist/cross_rank_sum.hpp"
#include "../core/precision.hpp"

namespace etnn::nn {

// How a backward pass leaves dL/dparams in the gradients: added to what they hold (micro-batches
// accumulate), or written over it (the first micro-batch of a step: what they hold is stale, as
// after PyTorch's zero_grad(set_to_none=True), and zeroing it first would be one more pass over
// every gradient).
enum class Gradients { add, overwrite };

// Reports, from inside a layer's backward, that the layer's gradients from `offset` on (counted
// from the layer's first parameter) are final; Program::backward passes them on as layer_done.
// Empty unless the step asks for a large weight's gradient in row blocks (weight_row_blocks.hpp).
struct GradientsFinal {
  void* context = nullptr;
  void (*report)(void* context, std::size_t offset) = nullptr;

  explicit operator bool() const noexcept { return report != nullptr; }
  void operator()(std::size_t offset) const { report(context, offset); }
};

template <class T>
struct Pass {
  bool training = true;    // PyTorch's module.training: batch statistics, dropout active
  T* buffers = nullptr;    // the layer's non-trainable state (running statistics), or null
  T* scratch = nullptr;    // scratch_values(batch) values of the layer's own during the call
  std::uint64_t seed = 0;  // random stream of this forward pass for this layer (dropout masks)
  dist::CrossRankSum sync{};     // sums over the ranks of a data-parallel step (synchronised batch norm)
  Products products = Products::own;  // the operands of matrix products (16-bit: mixed precision)
  // overwrite only for a layer that says overwrites_gradients (nn/layer.hpp); the executor zeroes
  // the others' gradients first and has them add.
  Gradients gradients = Gradients::add;
  // backward on the CPU: dy already holds dL/d(pre-activation), the layer above having applied this
  // layer's activation in its dX product (a layer that says takes_activation_gradient).
  bool dy_is_dz = false;
  // backward on the CPU, a layer with weight_row_blocks: set when the step wants its weight's
  // gradient in those blocks, the last first, each reported final as it completes.
  GradientsFinal gradients_final{};
};

}  // namespace etnn::nn
