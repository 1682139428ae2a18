#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// nn::layer_norm bound to its input: PyTorch's nn.LayerNorm(shape of the sample) with eps 1e-5,
// normalising each sample over all its N values, with elementwise affine weight (gamma) = 1 and
// bias (beta) = 0 of the sample's shape.
//   mu, var = mean and biased variance of the sample; xhat = (x - mu) / sqrt(var + eps)
//   y = gamma (.) xhat + beta                                  x, y: (B, N)
// Backward, with g = dy (.) gamma:
//   dgamma += sum_b dy (.) xhat,  dbeta += sum_b dy            a functor call per 16 features
//   dx = (g - mean(g) - xhat mean(g (.) xhat)) / sqrt(var + eps)   one call per row
// On a sequence (T, D) it normalises each position over its D values, as nn.LayerNorm(D) on a
// (B, T, D) tensor: weight and bias are (D), and the rows above are the B T positions.
// Forward keeps (mu, 1 / sqrt(var + eps)) per row when training. Each functor is ETNN_HD and
// serves both devices: host threads split its calls, the device runs a thread per call.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <type_traits>

#include "../core/config.hpp"
#include "../core/device.hpp"
#include "../core/lane_sum.hpp"

#include "../backend/executor.hpp"
#include "layer.hpp"

namespace etnn::nn {

namespace detail {
inline constexpr double layer_norm_eps = 1e-5;

// y's row b from x's, its statistics (mean, 1 / std) into stats[2b, 2b + 1] when not null.
// The sums run in T, in lanes (core/lane_sum.hpp): 8 partial sums of N / 8 values each, whose
// rounding error is that of a sum of N / 8 terms (in double they doubled the row passes' cost:
// conversions, and half the values a vector).
template <int N, class T>
struct LayerNormRows {
  const T* gamma;
  const T* beta;
  const T* x;
  T* y;
  T* stats;
  ETNN_HD void operator()(std::size_t b) const {
    const T* xb = x + b * N;
    T* yb = y + b * N;
    const T mean = etnn::detail::lane_sum<N, T>([&](int j) { return xb[j]; }) / T(N);
    const T var = etnn::detail::lane_sum<N, T>([&](int j) {
      const T centred = xb[j] - mean;
      return centred * centred;
    });
    const T inv_std = T(1) / std::sqrt(var / T(N) + T(layer_norm_eps));
    ETNN_SIMD
    for (int j = 0; j < N; ++j) yb[j] = static_cast<T>(gamma[j] * ((xb[j] - mean) * inv_std) + beta[j]);
    if (stats != nullptr) stats[2 * b] = static_cast<T>(mean), stats[2 * b + 1] = static_cast<T>(inv_std);
  }
};

// The gamma and beta gradients of features [f w, f w + w) (clipped to N) of call f, w =
// `features` per call, each summed over the rows in row order: the same sums whatever w is. On
// the host w = 64 reads four cache lines of each row at a time and vectorises across the
// features, its sums in registers (a call of w features, the common case, has a loop of constant
// length), instead of walking one column with stride N; the device runs one feature per thread.
// (gpt's 2-thread profile: 2.1% with w = 16 and a loop of variable length, 1.6% now; 32 gives
// the same: the pass is bound by reading dy and x.)
template <int N, class T>
struct LayerNormParameterGradients {
  static constexpr int host_features = 64;
#if defined(__CUDA_ARCH__)
  static constexpr int capacity = 1;  // the device's calls: one feature each
#else
  static constexpr int capacity = host_features;
#endif
  const T* x;
  const T* stats;
  const T* dy;
  T* gamma_grad;
  T* beta_grad;
  std::size_t rows;
  int features;
  ETNN_HD void operator()(std::size_t call) const {
    const int j0 = static_cast<int>(call) * features;  // features <= capacity
    const int n = N - j0 < features ? N - j0 : features;
    T dgamma[capacity], dbeta[capacity];
    for (int l = 0; l < n; ++l) dgamma[l] = gamma_grad[j0 + l], dbeta[l] = beta_grad[j0 + l];
    if (n == capacity)
      add_rows<capacity>(j0, n, dgamma, dbeta);
    else
      add_rows<0>(j0, n, dgamma, dbeta);
    for (int l = 0; l < n; ++l) gamma_grad[j0 + l] = dgamma[l], beta_grad[j0 + l] = dbeta[l];
  }

 private:
  // Adds every row's terms of features [j0, j0 + n) to dgamma and dbeta; Fixed: n, when not 0.
  template <int Fixed>
  ETNN_HD void add_rows(int j0, int n, T* dgamma, T* dbeta) const {
    const int count = Fixed > 0 ? Fixed : n;
    for (std::size_t b = 0; b < rows; ++b) {
      const T* dyb = dy + b * N + j0;
      const T* xb = x + b * N + j0;
      const T mean = stats[2 * b], inv_std = stats[2 * b + 1];
      ETNN_SIMD
      for (int l = 0; l < count; ++l) {
        dgamma[l] += dyb[l] * ((xb[l] - mean) * inv_std);
        dbeta[l] += dyb[l];
      }
    }
  }
};

// dx's row b.
template <int N, class T>
struct LayerNormInputGradientRows {
  const T* gamma;
  const T* x;
  const T* stats;
  const T* dy;
  T* dx;
  ETNN_HD void operator()(std::size_t b) const {
    const T* xb = x + b * N;
    const T* dyb = dy + b * N;
    T* dxb = dx + b * N;
    const T mean = stats[2 * b], inv_std = stats[2 * b + 1];
    const T mean_g = etnn::detail::lane_sum<N, T>([&](int j) { return dyb[j] * gamma[j]; }) / T(N);
    const T mean_g_xhat = etnn::detail::lane_sum<N, T>([&](int j) {
      return dyb[j] * gamma[j] * ((xb[j] - mean) * inv_std);
    }) / N;
    ETNN_SIMD
    for (int j = 0; j < N; ++j) {
      const T g = dyb[j] * gamma[j];
      dxb[j] = static_cast<T>((g - mean_g - (xb[j] - mean) * inv_std * mean_g_xhat) * inv_std);
    }
  }
};
}  // namespace detail

template <ShapeType In, int Index>
struct LayerNormLayer {
  static constexpr bool sequence = In::rank == 2;
  static constexpr int width = sequence ? In::dims[1] : static_cast<int>(In::size);  // values per row
  static constexpr int rows = static_cast<int>(In::size) / width;                      // rows per sample
  static constexpr ParamInfo shaped(std::string_view name, std::size_t offset) {
    ParamInfo info{name, sequence ? 1 : In::rank, {0, 0, 0, 0}, offset};
    if (sequence) info.shape[0] = width;
    else std::copy(In::dims.begin(), In::dims.end(), info.shape.begin());
    return info;
  }

  using in_shape = In;
  using out_shape = In;
  static constexpr int module_index = Index;
  static constexpr std::array<ParamInfo, 2> params = aligned_layout<2>({{shaped("weight", 0), shaped("bias", 0)}});
  static constexpr std::size_t num_params = slice_values(params);
  static constexpr std::size_t saved_per_sample = 2 * std::size_t{rows};  // mean and 1 / std per row
  static constexpr bool output_aliases_input = false;
  static constexpr bool backward_in_place = false;
  static constexpr bool cuda_kernels = true;  // the functors on the device

  template <class T>
  static void init(T* p, Rng&) {
    std::fill_n(p, width, T(1));
    std::fill_n(p + params[1].offset, width, T(0));
  }

  template <class T, class Device>
  static void forward(Device device, const Pass<T>&, const T* p, const T* x, T* y, T* saved, int batch) {
    for_each_index(device, row_count(batch), 3 * std::size_t{width},
                   detail::LayerNormRows<width, T>{p, p + params[1].offset, x, y, saved});
  }

  template <class T, class Device>
  static void backward(Device device, const Pass<T>&, const T* p, T* g, const T* x, const T*, const T* saved, T* dy,
                       T* dx, int batch) {
    const std::size_t n = row_count(batch);
    using ParameterGradients = detail::LayerNormParameterGradients<width, T>;
    const int features = std::is_same_v<Device, Cpu> ? ParameterGradients::host_features : 1;
    for_each_index(device, (std::size_t{width} + features - 1) / features, 2 * n * features,
                   ParameterGradients{x, saved, dy, g, g + params[1].offset, n, features});
    if (dx == nullptr) return;
    for_each_index(device, n, 4 * std::size_t{width}, detail::LayerNormInputGradientRows<width, T>{p, x, saved, dy, dx});
  }

 private:
  static std::size_t row_count(int batch) { return static_cast<std::size_t>(batch) * rows; }
};

}  // namespace etnn::nn
