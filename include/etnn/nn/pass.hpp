#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// What a layer's forward and backward see besides its parameters and activations. Program (the
// network executor) fills one per layer and call; backward gets the same values its forward had.
#include <cstdint>

#include "../dist/cross_rank_sum.hpp"
#include "../core/precision.hpp"

namespace etnn::nn {

template <class T>
struct Pass {
  bool training = true;    // PyTorch's module.training: batch statistics, dropout active
  T* buffers = nullptr;    // the layer's non-trainable state (running statistics), or null
  T* scratch = nullptr;    // scratch_values(batch) values of the layer's own during the call
  std::uint64_t seed = 0;  // random stream of this forward pass for this layer (dropout masks)
  dist::CrossRankSum sync{};     // sums over the ranks of a data-parallel step (synchronised batch norm)
  Products products = Products::own;  // the operands of matrix products (16-bit: mixed precision)
};

}  // namespace etnn::nn
