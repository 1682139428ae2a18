#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// nn::embedding<D> bound to token ids Tokens<T, V>: PyTorch's nn.Embedding(V, D), weight (V, D)
// initialised N(0, 1).
//   y[b, t, :] = W[id(b, t), :]                   ids: (B, T)  W: (V, D)  y: (B, T, D)
// Backward scatters: dW[v, :] += sum over the positions (b, t) with id(b, t) = v of dy[b, t, :].
// Each call of the gradient functor owns a block of 16 columns of dW and walks the positions in
// order, so the sums need no atomics and do not depend on the thread count. The ids have no
// gradient: the layer is always the first with parameters, and the executor passes dx = null.
// Ids are checked on the host (core/token_ids.hpp): here on every CPU forward, and by data::Dataset
// for the batches a loader stages to a device.
#include <cstddef>
#include <limits>
#include <type_traits>

#include "../core/config.hpp"
#include "../core/device.hpp"
#include "../core/token_ids.hpp"
#include "../backend/executor.hpp"
#include "checks.hpp"
#include "init.hpp"
#include "layer.hpp"

namespace etnn::nn {

namespace detail {

// V of Tokens<T, V>, or 1 for any other shape (whose layer's static_assert explains).
template <class In>
constexpr int vocabulary_of() {
  if constexpr (TokenShape<In>) return In::vocabulary;
  else return 1;
}

// Row r = b T + t of y from the weight's row id(b, t); NaNs for an id outside [0, V), which the
// device cannot throw for (the CPU has thrown before), so that the loss and the non-finite guard
// see it and nothing reads outside the weight.
template <int D, int V, class T>
struct EmbeddingRows {
  const T* weight;
  const T* ids;
  T* y;
  ETNN_HD void operator()(std::size_t r) const {
    if (!etnn::detail::valid_token_id(ids[r], V)) {
      for (int j = 0; j < D; ++j) y[r * D + j] = std::numeric_limits<T>::quiet_NaN();
      return;
    }
    const T* row = weight + static_cast<std::size_t>(ids[r]) * D;
    for (int j = 0; j < D; ++j) y[r * D + j] = row[j];
  }
};

// Columns [16 c, 16 c + 16) of dW, summed over the positions in order (an invalid id adds nothing).
template <int D, int V, class T>
struct EmbeddingGradientColumns {
  static constexpr int block = 16;
  const T* ids;
  const T* dy;
  T* weight_grad;
  std::size_t positions;  // B T
  ETNN_HD void operator()(std::size_t c) const {
    const int begin = static_cast<int>(c) * block;
    const int end = begin + block < D ? begin + block : D;
    for (std::size_t r = 0; r < positions; ++r) {
      if (!etnn::detail::valid_token_id(ids[r], V)) continue;
      T* grad_row = weight_grad + static_cast<std::size_t>(ids[r]) * D;
      for (int j = begin; j < end; ++j) grad_row[j] += dy[r * D + j];
    }
  }
};

}  // namespace detail

template <ShapeType In, int D, int Index>
struct EmbeddingLayer {
  static_assert(check::embedding_input<TokenShape<In>>());
  static_assert(check::positive_width<D>());
  static constexpr int length = In::dims[0];
  static constexpr int vocabulary = detail::vocabulary_of<In>();

  using in_shape = In;
  using out_shape = Shape<length, D>;
  static constexpr int module_index = Index;
  static constexpr std::size_t num_params = std::size_t{vocabulary} * D;
  static constexpr std::array<ParamInfo, 1> params{{{"weight", 2, {vocabulary, D, 0, 0}, 0}}};
  static constexpr std::size_t saved_per_sample = 0;
  static constexpr bool output_aliases_input = false;
  static constexpr bool backward_in_place = false;
  static constexpr bool cuda_kernels = true;  // the row and column functors on the device

  template <class T>
  static void init(T* p, Rng& rng) {
    init_standard_normal(p, num_params, rng);
  }

  template <class T, class Device>
  static void forward(Device device, const Pass<T>&, const T* p, const T* x, T* y, T*, int batch) {
    // On the host every forward checks the ids; device ids were checked by the Dataset they came from.
    if constexpr (std::is_same_v<Device, Cpu>)
      etnn::detail::check_token_ids<length, vocabulary>(x, positions(batch), "etnn::nn::embedding");
    for_each_index(device, positions(batch), std::size_t{D}, detail::EmbeddingRows<D, vocabulary, T>{p, x, y});
  }

  template <class T, class Device>
  static void backward(Device device, const Pass<T>&, const T*, T* g, const T* x, const T*, const T*, T* dy, T*,
                       int batch) {
    using Columns = detail::EmbeddingGradientColumns<D, vocabulary, T>;
    for_each_index(device, (std::size_t{D} + Columns::block - 1) / Columns::block, positions(batch) * Columns::block,
                   Columns{x, dy, g, positions(batch)});
  }

 private:
  static std::size_t positions(int batch) { return static_cast<std::size_t>(batch) * length; }
};

}  // namespace etnn::nn
