#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// nn::positional_embedding bound to a sequence (T, D): a learned position table P, weight (T, D)
// initialised N(0, 1) as nn.Embedding(T, D), added to every sample.
//   y[b, t, :] = x[b, t, :] + P[t, :]            x, y: (B, T, D)
//   dP[t, d] += sum_b dy[b, t, d]  (one functor call per entry, samples in order),  dx = dy
#include <cstddef>

#include "../core/config.hpp"
#include "../backend/executor.hpp"
#include "../backend/memory.hpp"
#include "checks.hpp"
#include "init.hpp"
#include "layer.hpp"

namespace etnn::nn {

namespace detail {

template <std::size_t N, class T>
struct AddPositions {
  const T* table;
  const T* x;
  T* y;
  ETNN_HD void operator()(std::size_t i) const { y[i] = x[i] + table[i % N]; }
};

template <std::size_t N, class T>
struct PositionGradients {
  const T* dy;
  T* table_grad;
  std::size_t batch;
  ETNN_HD void operator()(std::size_t i) const {
    T sum = table_grad[i];
    for (std::size_t b = 0; b < batch; ++b) sum += dy[b * N + i];
    table_grad[i] = sum;
  }
};

}  // namespace detail

template <ShapeType In, int Index>
struct PositionalEmbeddingLayer {
  static_assert(check::sequence_input<In, TokenShape<In>>());
  static constexpr std::size_t table = In::size;  // T D

  using in_shape = In;
  using out_shape = In;
  static constexpr int module_index = Index;
  static constexpr std::size_t num_params = table;
  static constexpr std::array<ParamInfo, 1> params{{{"weight", 2, {dim_or_one<In>(0), dim_or_one<In>(1), 0, 0}, 0}}};
  static constexpr std::size_t saved_per_sample = 0;
  static constexpr bool output_aliases_input = false;
  static constexpr bool backward_in_place = true;
  static constexpr bool cuda_kernels = true;  // the functors and copy_rows on the device

  template <class T>
  static void init(T* p, Rng& rng) {
    init_standard_normal(p, num_params, rng);
  }

  template <class T, class Device>
  static void forward(Device device, const Pass<T>&, const T* p, const T* x, T* y, T*, int batch) {
    for_each_index(device, table * static_cast<std::size_t>(batch), detail::AddPositions<table, T>{p, x, y});
  }

  template <class T, class Device>
  static void backward(Device device, const Pass<T>&, const T*, T* g, const T*, const T*, const T*, T* dy, T* dx,
                       int batch) {
    const auto samples = static_cast<std::size_t>(batch);
    for_each_index(device, table, samples, detail::PositionGradients<table, T>{dy, g, samples});
    if (dx != nullptr && dx != dy) copy_rows(device, dy, table, dx, table, table, samples);
  }
};

}  // namespace etnn::nn
