#pragma once
// Layer normalisation over each sample's N values on the CPU, PyTorch's nn.LayerNorm(shape) with
// eps 1e-5 and elementwise affine (gamma, beta of the sample's shape).
//   mu, var = mean and biased variance of the sample; xhat = (x - mu) / sqrt(var + eps)
//   y = gamma (.) xhat + beta                                  x, y: (B, N)
// Backward, with g = dy (.) gamma:
//   dgamma += sum_b dy (.) xhat,  dbeta += sum_b dy            split by feature across threads
//   dx = (g - mean(g) - xhat mean(g (.) xhat)) / sqrt(var + eps)   split by sample
// Forward keeps (mu, 1 / sqrt(var + eps)) per sample in `stats` when training.
#include <cmath>
#include <cstddef>

#include "../core/device.hpp"
#include "parallel.hpp"

namespace etnn {

inline constexpr double layer_norm_eps = 1e-5;

template <int N, class T>
void layer_norm_forward(Cpu, const T* gamma, const T* beta, const T* x, T* y, T* stats, int batch) {
  cpu::parallel_chunks(static_cast<std::size_t>(batch), 1, 3 * N, [&](std::size_t begin, std::size_t end) {
    for (std::size_t b = begin; b < end; ++b) {
      const T* xb = x + b * N;
      T* yb = y + b * N;
      double mean = 0, var = 0;
      for (int j = 0; j < N; ++j) mean += xb[j];
      mean /= N;
      for (int j = 0; j < N; ++j) var += (xb[j] - mean) * (xb[j] - mean);
      const double inv_std = 1.0 / std::sqrt(var / N + layer_norm_eps);
      for (int j = 0; j < N; ++j) yb[j] = static_cast<T>(gamma[j] * ((xb[j] - mean) * inv_std) + beta[j]);
      if (stats != nullptr) stats[2 * b] = static_cast<T>(mean), stats[2 * b + 1] = static_cast<T>(inv_std);
    }
  });
}

template <int N, class T>
void layer_norm_backward(Cpu, const T* gamma, T* gamma_grad, T* beta_grad, const T* x, const T* stats, const T* dy,
                         T* dx, int batch) {
  const auto samples = static_cast<std::size_t>(batch);
  const auto xhat = [&](std::size_t b, int j) { return (x[b * N + j] - stats[2 * b]) * stats[2 * b + 1]; };
  cpu::parallel_chunks(std::size_t{N}, 16, samples, [&](std::size_t begin, std::size_t end) {
    for (std::size_t b = 0; b < samples; ++b) {
      for (auto j = static_cast<int>(begin); j < static_cast<int>(end); ++j) {
        gamma_grad[j] += dy[b * N + j] * xhat(b, j);
        beta_grad[j] += dy[b * N + j];
      }
    }
  });
  if (dx == nullptr) return;
  cpu::parallel_chunks(samples, 1, 3 * N, [&](std::size_t begin, std::size_t end) {
    for (std::size_t b = begin; b < end; ++b) {
      double sum_g = 0, sum_g_xhat = 0;
      for (int j = 0; j < N; ++j) {
        const double g = dy[b * N + j] * gamma[j];
        sum_g += g;
        sum_g_xhat += g * xhat(b, j);
      }
      for (int j = 0; j < N; ++j) {
        const double g = dy[b * N + j] * gamma[j];
        dx[b * N + j] = static_cast<T>((g - sum_g / N - xhat(b, j) * sum_g_xhat / N) * stats[2 * b + 1]);
      }
    }
  });
}

}  // namespace etnn
