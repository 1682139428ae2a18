#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// nn::conv1d<Out, K, stride<S>, pad<P>> bound to a sequence (T, C), optionally fused with the
// activation that follows it: PyTorch's nn.Conv1d(C, Out, K, stride=S, padding=P) over the
// positions, i.e. conv(x.transpose(1, 2)).transpose(1, 2), so that sequences stay (T, D) as every
// sequence layer here has them (nn.Conv1d itself takes (B, C, T)).
//   y[t, o] = f(b[o] + sum_{c, k} W[o, c, k] x[t S - P + k, c])     x = 0 outside [0, T)
//   x: (B, T, C)  W: (Out, C, K)  b: (Out)  y: (B, T', Out),  T' = (T + 2P - K) / S + 1
// As a product: the columns X' (B T', C K), X'[(b, t), c K + k] = x[b, t S - P + k, c] (im2col
// over positions), then a DenseLayer over the B T' rows whose weight is W read as (Out, C K),
// PyTorch's layout flattened: y = f(X' W^T + b). The bias and activation epilogue, the gradient
// modes, the devices and mixed precision are nn::linear's.
// Backward converts again (X' is not kept), runs the DenseLayer's backward (dW, db and dX'), then
//   dx[i, c] = sum over the (t, k) with t S - P + k = i of dX'[(b, t), c K + k], k ascending:
// a gather, so every dx entry is written once, without atomics, in an order that no device or
// thread count changes.
#include <cstddef>

#include "../core/config.hpp"
#include "../backend/executor.hpp"
#include "checks.hpp"
#include "dense_layer.hpp"
#include "layer.hpp"

namespace etnn::nn {

namespace detail {

// The window over the positions of a (Length, Channels) sequence, PyTorch's arithmetic:
// T' = floor((T + 2 pad - kernel) / stride) + 1, the padding virtual.
template <int Length, int Channels, int Kernel, int Stride, int Pad>
struct SequenceWindow {
  static constexpr int length = Length;
  static constexpr int channels = Channels;
  static constexpr int kernel = Kernel;
  static constexpr int out_length = (Length + 2 * Pad - Kernel) / Stride + 1;
  static constexpr int depth = Channels * Kernel;  // the columns' width C K
  // Input position of window tap k at output position t (outside [0, Length): padding).
  ETNN_HD static constexpr int in_position(int t, int k) { return t * Stride - Pad + k; }
  // The output position whose tap k reads input position i, or -1 when none does.
  ETNN_HD static constexpr int out_position(int i, int k) {
    const int shifted = i + Pad - k;
    if (shifted < 0 || shifted % Stride != 0 || shifted / Stride >= out_length) return -1;
    return shifted / Stride;
  }
};

// Row r = b T' + t of the columns X' (depth values) from sample b of x.
template <class G, class T>
struct SequenceColumns {
  const T* x;
  T* columns;
  ETNN_HD void operator()(std::size_t r) const {
    const std::size_t b = r / G::out_length;
    const int t = static_cast<int>(r % G::out_length);
    T* row = columns + r * G::depth;
    for (int k = 0; k < G::kernel; ++k) {
      const int i = G::in_position(t, k);
      if (i < 0 || i >= G::length) {
        for (int c = 0; c < G::channels; ++c) row[c * G::kernel + k] = T(0);
        continue;
      }
      const T* in = x + (b * G::length + static_cast<std::size_t>(i)) * G::channels;
      for (int c = 0; c < G::channels; ++c) row[c * G::kernel + k] = in[c];
    }
  }
};

// Row r = b T + i of dx (channels values): the column entries that read x[b, i, :], summed over
// the taps in ascending order.
template <class G, class T>
struct SequenceColumnsGradient {
  const T* column_grad;
  T* dx;
  ETNN_HD void operator()(std::size_t r) const {
    const std::size_t b = r / G::length;
    const int i = static_cast<int>(r % G::length);
    T* out = dx + r * G::channels;
    for (int c = 0; c < G::channels; ++c) out[c] = T(0);
    for (int k = 0; k < G::kernel; ++k) {
      const int t = G::out_position(i, k);
      if (t < 0) continue;
      const T* row = column_grad + (b * G::out_length + static_cast<std::size_t>(t)) * G::depth;
      for (int c = 0; c < G::channels; ++c) out[c] += row[c * G::kernel + k];
    }
  }
};

}  // namespace detail

template <ShapeType In, int Out, int Kernel, int Stride, int Pad, class Act, int Index>
struct Conv1dLayer {
  static_assert(check::sequence_input<In, TokenShape<In>>());
  static_assert(check::positive_width<Out>());
  static_assert(check::window_params<Kernel, Stride, Pad>());
  static_assert(check::window_fits<dim_or_one<In>(0), Kernel, Pad>());
  using geometry = detail::SequenceWindow<dim_or_one<In>(0), dim_or_one<In>(1), Kernel, Stride, Pad>;
  // The product over the columns: nn::linear<Out> on a (T', C K) sequence.
  using Product = DenseLayer<Shape<geometry::out_length, geometry::depth>, Out, Act, Index>;
  static constexpr std::size_t columns_per_sample = std::size_t{geometry::out_length} * geometry::depth;

  using in_shape = In;
  using out_shape = typename Product::out_shape;
  using activation = Act;
  static constexpr int module_index = Index;
  static constexpr std::size_t num_params = Product::num_params;
  static constexpr std::array<ParamInfo, 2> params{{
      {"weight", 3, {Out, geometry::channels, Kernel, 0}, 0},
      {"bias", 1, {Out, 0, 0, 0}, Product::params[1].offset},
  }};
  static constexpr std::size_t saved_per_sample = Product::saved_per_sample;
  static constexpr bool output_aliases_input = false;
  static constexpr bool backward_in_place = false;
  static constexpr bool cuda_kernels = true;  // the column functors and the DenseLayer on the device
  static constexpr bool overwrites_gradients = Product::overwrites_gradients;

  // The columns X' and, in backward, their gradient dX', from aligned offsets.
  static constexpr std::size_t scratch_values(int batch) {
    return 2 * aligned_values(columns_per_sample) * static_cast<std::size_t>(batch);
  }

  // U(+-1/sqrt(C K)) for weight and bias, as nn.Conv1d: the product's fan-in is C K.
  template <class T>
  static void init(T* p, Rng& rng) {
    Product::init(p, rng);
  }

  template <class T, class Device>
  static void forward(Device device, const Pass<T>& pass, const T* p, const T* x, T* y, T* saved, int batch) {
    T* columns = pass.scratch;
    to_columns(device, x, columns, batch);
    Product::forward(device, pass, p, columns, y, saved, batch);
  }

  template <class T, class Device>
  static void backward(Device device, const Pass<T>& pass, const T* p, T* g, const T* x, const T* y, const T* saved,
                       T* dy, T* dx, int batch) {
    T* columns = pass.scratch;
    T* column_grad =
        dx != nullptr ? columns + aligned_values(columns_per_sample) * static_cast<std::size_t>(batch) : nullptr;
    to_columns(device, x, columns, batch);
    Product::backward(device, pass, p, g, columns, y, saved, dy, column_grad, batch);
    if (dx == nullptr) return;
    for_each_index(device, static_cast<std::size_t>(batch) * geometry::length, std::size_t{Kernel} * geometry::channels,
                   detail::SequenceColumnsGradient<geometry, T>{column_grad, dx});
  }

 private:
  template <class T, class Device>
  static void to_columns(Device device, const T* x, T* columns, int batch) {
    for_each_index(device, static_cast<std::size_t>(batch) * geometry::out_length, std::size_t{geometry::depth},
                   detail::SequenceColumns<geometry, T>{x, columns});
  }
};

}  // namespace etnn::nn
