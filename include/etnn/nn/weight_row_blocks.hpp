#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// A large weight's gradient in row blocks, so that a data-parallel step starts reducing it before
// backward has finished it. A layer whose first parameter is a (rows, row_size) weight, row-major,
// declares its blocks (`weight_row_blocks`, nn/layer.hpp); its CPU backward then computes
//   dW[rows of block k] = dZ^T[rows of block k] X      for k = count - 1 down to 0
// when the step asks for it (Pass::gradients_final), reporting after each block that the layer's
// gradients from that block's first value on are final. The rows are independent dot products
// over the batch, so the blocks give the bits of one product. Program::gradient_cuts lists the
// blocks' starts, where optim's gradient buckets may then end (PyTorch's DDP cuts buckets only
// between tensors, so its first layer's weight, the last gradient backward finishes, is reduced
// only after all of backward).
//
//   weight (rows x row_size)   [ block 0 | block 1 | ... | block count-1 ] [ bias ... ]
//   backward computes                                  <------------------   first
#include <algorithm>
#include <cstddef>

namespace etnn::nn {

struct WeightRowBlocks {
  // Each block has at least min_block_values values and min_block_rows rows (a multiple of 16:
  // whole register tiles of the CPU's product), and there are at most max_count: every block is a
  // product of its own, which packs X again and forks the threads again (on 2 threads, mlp784's
  // backward at batch 64 took 10% longer in 3 blocks of 176 rows than in one product).
  static constexpr std::size_t min_block_values = std::size_t{1} << 17;
  static constexpr int min_block_rows = 256;
  static constexpr int max_count = 4;

  int count = 1;             // 1: the gradient in one product, nothing reported inside the layer
  int rows = 0;              // rows per block; the last block may have fewer
  int weight_rows = 0;
  std::size_t row_size = 0;  // values per row

  static constexpr WeightRowBlocks of(int weight_rows, int row_size) {
    const auto size = static_cast<std::size_t>(row_size);
    const std::size_t by_values = static_cast<std::size_t>(weight_rows) * size / min_block_values;
    const int wanted = static_cast<int>(std::min<std::size_t>({std::size_t{max_count}, by_values,
                                                              static_cast<std::size_t>(weight_rows / min_block_rows)}));
    if (wanted < 2) return {1, weight_rows, weight_rows, size};
    const int rows = ((weight_rows + wanted - 1) / wanted + 15) / 16 * 16;
    return {(weight_rows + rows - 1) / rows, rows, weight_rows, size};
  }

  // The first value of block k (k = count: the end of the weight), from the weight's start.
  constexpr std::size_t begin(int k) const {
    return static_cast<std::size_t>(std::min(weight_rows, k * rows)) * row_size;
  }
};

}  // namespace etnn::nn
