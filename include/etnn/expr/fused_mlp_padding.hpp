#pragma once
// Private to expr/: include <etnn/expr/expr.hpp> or <etnn/etnn.hpp>.
// Padding a narrow MLP to the fully fused kernels' widths (16, 32, 64 or 128), so that any chain of
// linear layers with ReLU, tanh or SiLU between them and every width at most 128 runs fused: an
// input of 20 features or 10 classes out is carried as 32 and 16.
//
// Widths W_0 .. W_L (W_0 the input), padded P_l = fused_width(W_l). Parameters are laid out per
// layer as etnn's linear layers are (MlpLayout): weight (W_{l+1}, W_l) row-major then bias
// (W_{l+1}), each from an aligned offset; the padded network's the same way with P. Padding is
// zeros: the padded network computes the same function
// on the true features, because
//   - a padded input column meets only zero weights;
//   - a padded hidden unit has zero weights in and zero bias, so it is f(0) = 0 (ReLU, tanh and
//     SiLU all map 0 to 0), and its weights out are zero too, so its gradient dA is 0 and so is its
//     dZ = dA f'(0) (f'(0) is finite: 0, 1 and 1/2);
//   - a padded output is 0 and, given a zero gradient (dy padded with zeros), sends nothing back.
// Its true parameters' gradients are therefore the true network's, and its padding's are zero.
// The maps below are between true and padded parameter indices; device-neutral, they run on the
// host (tests) and on the device (the copy kernels of cuda/fused_mlp/padding.hpp).
#include <cstddef>
#include <type_traits>

#include "../core/alignment.hpp"
#include "../core/config.hpp"
#include "functors.hpp"

namespace etnn::expr::detail {

// The activations the fused chain's hidden layers take (one for all of them), forward and backward
// (cuda/fused_mlp/net.hpp), through the CPU's own functors and its fused layers' steps:
//   A_{l+1} = fn::activate(f, Z_l, &K_{l+1})     K = f'(Z) kept where f' needs Z (SiLU), else none
//   dZ_{l-1} = fn::chain_kept(f, dA_l, A_l, K_l)  = dA_l f'(A_l) (ReLU: [A_l > 0], tanh: 1 - A_l^2),
//                                                   or dA_l K_l (SiLU)
// So both devices agree on every value: ReLU keeps a NaN (the non-finite guard must see it), and its
// backward step is the CPU's select (dA where A > 0, else 0, as PyTorch's threshold_backward).
template <class F>
inline constexpr bool fused_hidden = std::is_same_v<F, fn::Relu> || std::is_same_v<F, fn::Tanh> ||
                                     std::is_same_v<F, fn::Silu>;

// The smallest fused kernel width that holds w features: 16, 32, 64 or 128; 0 when w > 128.
ETNN_HD constexpr int fused_width(int w) {
  return w <= 16 ? 16 : w <= 32 ? 32 : w <= 64 ? 64 : w <= 128 ? 128 : 0;
}

// The flat parameters of a chain of linear layers of widths w_0 .. w_L, laid out as a Program lays
// out etnn's linear layers (nn/dense_layer.hpp, nn/program.hpp): layer l's weight (w_{l+1}, w_l)
// row-major from weight_at(l), its bias (w_{l+1}) from bias_at(l), each offset a multiple of
// region_alignment_values, zeros between. The fused kernels read them there.
template <int... Widths>
struct MlpLayout {
  static constexpr int layers = static_cast<int>(sizeof...(Widths)) - 1;
  ETNN_HD static constexpr std::size_t in(int l) {
    constexpr int widths[] = {Widths...};
    return std::size_t(widths[l]);
  }
  ETNN_HD static constexpr std::size_t out(int l) { return in(l + 1); }
  // Values layer l's weight and its whole slice (weight, then bias) take, each part aligned.
  ETNN_HD static constexpr std::size_t weight_slice(int l) { return aligned_values(out(l) * in(l)); }
  ETNN_HD static constexpr std::size_t slice(int l) { return weight_slice(l) + aligned_values(out(l)); }
  // Layer l's weight; weight_at(layers) is the end of the last bias slice, the layout's length.
  ETNN_HD static constexpr std::size_t weight_at(int l) {
    std::size_t at = 0;
    for (int m = 0; m < l; ++m) at += slice(m);
    return at;
  }
  ETNN_HD static constexpr std::size_t bias_at(int l) { return weight_at(l) + weight_slice(l); }
  static constexpr std::size_t size = weight_at(layers);

  // The parameter at flat index i: its layer, and its row and column in the weight (column -1:
  // the bias); layer -1 where i lies between tensors.
  struct Place {
    int layer;
    std::size_t row;
    long column;
  };
  ETNN_HD static constexpr Place place(std::size_t i) {
    std::size_t weight = 0;  // weight_at(l), kept as l moves (one pass over the layers)
    for (int l = 0; l < layers; ++l) {
      const std::size_t bias = weight + weight_slice(l);
      const std::size_t next = weight + slice(l);
      if (i < next) {
        if (i < weight + out(l) * in(l)) return {l, (i - weight) / in(l), static_cast<long>((i - weight) % in(l))};
        if (i >= bias && i < bias + out(l)) return {l, i - bias, -1};
        break;
      }
      weight = next;
    }
    return {-1, 0, 0};
  }
  // Flat index of weight (row, column) of layer l, or of its bias row when column is -1.
  ETNN_HD static constexpr std::size_t index(int l, std::size_t row, long column) {
    return column < 0 ? bias_at(l) + row : weight_at(l) + row * in(l) + static_cast<std::size_t>(column);
  }
};

template <int... Widths>
struct PaddedMlp {
  static_assert(sizeof...(Widths) >= 2, "a chain of linear layers has an input and an output width");
  static constexpr int layers = static_cast<int>(sizeof...(Widths)) - 1;
  static constexpr bool fits = ((Widths > 0 && fused_width(Widths) != 0) && ...);
  static constexpr bool needed = ((fused_width(Widths) != Widths) || ...);
  using true_layout = MlpLayout<Widths...>;
  using padded_layout = MlpLayout<fused_width(Widths)...>;

  // The flat lengths, true and padded (tensors and the zeros that align them).
  static constexpr std::size_t num_params = true_layout::size;
  static constexpr std::size_t padded_params = padded_layout::size;

  // Where true flat index i (< num_params) lives in the padded layout; padded_params where i lies
  // between tensors.
  ETNN_HD static constexpr std::size_t padded_index(std::size_t i) {
    const auto at = true_layout::place(i);
    return at.layer < 0 ? padded_params : padded_layout::index(at.layer, at.row, at.column);
  }

  // The true flat index of padded index j (< padded_params), or num_params where j is padding.
  ETNN_HD static constexpr std::size_t true_index(std::size_t j) {
    const auto at = padded_layout::place(j);
    if (at.layer < 0 || at.row >= true_layout::out(at.layer) ||
        (at.column >= 0 && static_cast<std::size_t>(at.column) >= true_layout::in(at.layer)))
      return num_params;
    return true_layout::index(at.layer, at.row, at.column);
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
