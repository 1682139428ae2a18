#pragma once
// Private to expr/: include <etnn/expr/expr.hpp> or <etnn/etnn.hpp>.
// Padding a narrow MLP to the fully fused kernels' widths (16, 32, 64 or 128), so that any chain of
// linear layers with ReLU between them and every width at most 128 runs fused: an input of 20
// features or 10 classes out is carried as 32 and 16.
//
// Widths W_0 .. W_L (W_0 the input), padded P_l = fused_width(W_l). Parameters are laid out per
// layer as etnn and PyTorch do, weight (W_{l+1}, W_l) row-major then bias (W_{l+1}); the padded
// network's the same way with P. Padding is zeros: the padded network computes the same function
// on the true features, because
//   - a padded input column meets only zero weights;
//   - a padded hidden unit has zero weights in and zero bias, so it is ReLU(0) = 0, and its
//     weights out are zero too;
//   - a padded output is 0 and, given a zero gradient (dy padded with zeros), sends nothing back.
// Its true parameters' gradients are therefore the true network's, and its padding's are zero.
// The maps below are between true and padded parameter indices; device-neutral, they run on the
// host (tests) and on the device (the copy kernels of cuda/fused_mlp/padding.hpp).
#include <cstddef>

#include "../core/config.hpp"
#include "functors.hpp"

namespace etnn::expr::detail {

// The activation of the fused chain's hidden layers, forward and backward (cuda/fused_mlp/net.hpp):
//   A_{l+1} = relu(Z_l)      dZ_{l-1} = dA_l relu'(A_l, A_l) = dA_l [A_l > 0]
// It is the CPU's ReLU itself, so both devices agree on every value: a NaN stays NaN (the
// non-finite guard must see it), and a NaN or infinite dA_l at an inactive unit gives NaN as the
// CPU's product does.
using FusedHidden = fn::Relu;

// The smallest fused kernel width that holds w features: 16, 32, 64 or 128; 0 when w > 128.
ETNN_HD constexpr int fused_width(int w) {
  return w <= 16 ? 16 : w <= 32 ? 32 : w <= 64 ? 64 : w <= 128 ? 128 : 0;
}

template <int... Widths>
struct PaddedMlp {
  static_assert(sizeof...(Widths) >= 2, "a chain of linear layers has an input and an output width");
  static constexpr int layers = static_cast<int>(sizeof...(Widths)) - 1;
  static constexpr bool fits = ((Widths > 0 && fused_width(Widths) != 0) && ...);
  static constexpr bool needed = ((fused_width(Widths) != Widths) || ...);

  // Parameters of the chain, true or padded: sum_l w_{l+1} (w_l + 1).
  static constexpr std::size_t params_of(bool padded) {
    constexpr int widths[] = {Widths...};
    const auto width = [&](int l) { return std::size_t(padded ? fused_width(widths[l]) : widths[l]); };
    std::size_t total = 0;
    for (int l = 0; l < layers; ++l) total += width(l + 1) * (width(l) + 1);
    return total;
  }
  static constexpr std::size_t num_params = params_of(false);
  static constexpr std::size_t padded_params = params_of(true);

  // Where true parameter i (< num_params) lives in the padded layout.
  ETNN_HD static constexpr std::size_t padded_index(std::size_t i) {
    constexpr int widths[] = {Widths...};
    std::size_t at = 0, padded_at = 0;
    for (int l = 0; l < layers; ++l) {
      const std::size_t in = std::size_t(widths[l]), out = std::size_t(widths[l + 1]);
      const std::size_t in_p = std::size_t(fused_width(widths[l])), out_p = std::size_t(fused_width(widths[l + 1]));
      if (i < at + out * (in + 1)) {
        const std::size_t k = i - at;
        return k < out * in ? padded_at + k / in * in_p + k % in : padded_at + out_p * in_p + (k - out * in);
      }
      at += out * (in + 1);
      padded_at += out_p * (in_p + 1);
    }
    return padded_params;
  }

  // The true parameter at padded index j (< padded_params), or num_params where j is padding.
  ETNN_HD static constexpr std::size_t true_index(std::size_t j) {
    constexpr int widths[] = {Widths...};
    std::size_t at = 0, padded_at = 0;
    for (int l = 0; l < layers; ++l) {
      const std::size_t in = std::size_t(widths[l]), out = std::size_t(widths[l + 1]);
      const std::size_t in_p = std::size_t(fused_width(widths[l])), out_p = std::size_t(fused_width(widths[l + 1]));
      if (j < padded_at + out_p * (in_p + 1)) {
        const std::size_t k = j - padded_at;
        if (k < out_p * in_p) {
          const std::size_t row = k / in_p, col = k % in_p;
          return row < out && col < in ? at + row * in + col : num_params;
        }
        const std::size_t row = k - out_p * in_p;
        return row < out ? at + out * in + row : num_params;
      }
      at += out * (in + 1);
      padded_at += out_p * (in_p + 1);
    }
    return num_params;
  }
};

// Element `index` of a (rows, to_cols) row-major matrix copied from a (rows, from_cols) one:
// the same element where column < from_cols, else 0. Pads columns (to_cols > from_cols) or drops
// them (to_cols < from_cols).
template <class T>
ETNN_HD constexpr T column_copy_element(const T* from, int from_cols, int to_cols, std::size_t index) {
  const std::size_t row = index / std::size_t(to_cols), col = index % std::size_t(to_cols);
  return col < std::size_t(from_cols) ? from[row * std::size_t(from_cols) + col] : T(0);
}

}  // namespace etnn::expr::detail
