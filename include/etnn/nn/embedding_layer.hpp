#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// nn::embedding<D> bound to token ids Tokens<T, V>: PyTorch's nn.Embedding(V, D), weight (V, D)
// initialised N(0, 1).
//   y[b, t, :] = W[id(b, t), :]                   ids: (B, T)  W: (V, D)  y: (B, T, D)
// Backward scatters: dW[v, :] += sum over the positions (b, t) with id(b, t) = v of dy[b, t, :].
// Each call of the gradient functor owns a block of 16 columns of dW and walks the positions in
// order, so the sums need no atomics and do not depend on the thread count. The ids have no
// gradient: the layer is always the first with parameters, and the executor passes dx = null.
#include <cmath>
#include <cstddef>
#include <string>

#include "../core/config.hpp"
#include "../core/error.hpp"
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

// Throws unless every id of the batch is an integer in [0, V), naming the first that is not.
template <int T, int V, class Scalar>
void check_token_ids(const Scalar* ids, int batch) {
  for (std::size_t i = 0; i < static_cast<std::size_t>(batch) * T; ++i) {
    const Scalar id = ids[i];
    if (id >= Scalar(0) && id < Scalar(V) && std::floor(id) == id) continue;
    throw ShapeError(etnn::detail::message(
        "etnn::nn::embedding", "token id ", std::to_string(static_cast<double>(id)), " of sample ",
        std::to_string(i / T), ", position ", std::to_string(i % T), " is outside [0, ", std::to_string(V),
        "); the network's nn::input_tokens<", std::to_string(T), ", ", std::to_string(V), "> takes ", std::to_string(V),
        " ids (or the data was not tokenised with this vocabulary)"));
  }
}

// Row r = b T + t of y from the weight's row id(b, t).
template <int D, class T>
struct EmbeddingRows {
  const T* weight;
  const T* ids;
  T* y;
  ETNN_HD void operator()(std::size_t r) const {
    const T* row = weight + static_cast<std::size_t>(ids[r]) * D;
    for (int j = 0; j < D; ++j) y[r * D + j] = row[j];
  }
};

// Columns [16 c, 16 c + 16) of dW, summed over the positions in order.
template <int D, class T>
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

  template <class T>
  static void init(T* p, Rng& rng) {
    init_standard_normal(p, num_params, rng);
  }

  template <class T, class Device>
  static void forward(Device device, const Pass<T>&, const T* p, const T* x, T* y, T*, int batch) {
    detail::check_token_ids<length, vocabulary>(x, batch);
    for_each_index(device, positions(batch), std::size_t{D}, detail::EmbeddingRows<D, T>{p, x, y});
  }

  template <class T, class Device>
  static void backward(Device device, const Pass<T>&, const T*, T* g, const T* x, const T*, const T*, T* dy, T*,
                       int batch) {
    using Columns = detail::EmbeddingGradientColumns<D, T>;
    for_each_index(device, (std::size_t{D} + Columns::block - 1) / Columns::block, positions(batch) * Columns::block,
                   Columns{x, dy, g, positions(batch)});
  }

 private:
  static std::size_t positions(int batch) { return static_cast<std::size_t>(batch) * length; }
};

}  // namespace etnn::nn
