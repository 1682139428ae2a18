#pragma once
// Batch normalisation on the CPU, PyTorch's nn.BatchNorm1d/2d with momentum 0.1 and eps 1e-5.
//   x, y: (B, C, S) with S the spatial size (1 after a linear layer)   gamma, beta: (C)
//   training:  mu_c, var_c = mean and biased variance of x[:, c, :] over n = B S values
//              running_mean = (1 - m) running_mean + m mu_c
//              running_var  = (1 - m) running_var + m var_c n / (n - 1)   (unbiased, as PyTorch)
//   eval:      mu_c, var_c = running_mean, running_var
//   y = gamma_c (x - mu_c) / sqrt(var_c + eps) + beta_c
// Backward, with xhat = (x - mu) / sqrt(var + eps):
//   dbeta += sum dy,  dgamma += sum dy xhat
//   training:  dx = gamma / sqrt(var + eps) (dy - mean(dy) - xhat mean(dy xhat))
//   eval:      dx = gamma / sqrt(var + eps) dy
// Backward recomputes the batch statistics from x instead of keeping them. Channels run in
// parallel; sums are accumulated in double. dx may be dy (in place).
#include <cmath>
#include <cstddef>
#include <string>

#include "../core/device.hpp"
#include "../core/error.hpp"
#include "parallel.hpp"

namespace etnn {

inline constexpr double batch_norm_momentum = 0.1;
inline constexpr double batch_norm_eps = 1e-5;

namespace cpu {

// Calls f(i) for every index of channel c in a (B, C, S) tensor, in memory order.
template <int C, int S, class F>
void for_channel(int batch, int c, F&& f) {
  for (int b = 0; b < batch; ++b) {
    const std::size_t base = (static_cast<std::size_t>(b) * C + static_cast<std::size_t>(c)) * S;
    for (std::size_t s = 0; s < S; ++s) f(base + s);
  }
}

struct ChannelStatistics {
  double mean, var, inv_std;
};

// This batch's statistics of channel c (training) or the running ones (eval).
template <int C, int S, class T>
ChannelStatistics channel_statistics(const T* x, const T* running, int batch, int c, bool training) {
  double mean = 0, var = 0;
  if (training) {
    const double n = static_cast<double>(batch) * S;
    for_channel<C, S>(batch, c, [&](std::size_t i) { mean += x[i]; });
    mean /= n;
    for_channel<C, S>(batch, c, [&](std::size_t i) { var += (x[i] - mean) * (x[i] - mean); });
    var /= n;
  } else {
    mean = running[c];
    var = running[C + c];
  }
  return {mean, var, 1.0 / std::sqrt(var + batch_norm_eps)};
}

template <int C, int S>
void require_batch_statistics(int batch, const char* who) {
  if (static_cast<long long>(batch) * S < 2)
    throw ShapeError(std::string(who) + ": training needs more than one value per channel, got a batch of " +
                     std::to_string(batch) + "; use a larger batch or eval()");
}

}  // namespace cpu

// running: [running_mean (C), running_var (C), num_batches_tracked (1)]; updated when training.
template <int C, int S, class T>
void batch_norm_forward(Cpu, const T* gamma, const T* beta, T* running, const T* x, T* y, int batch, bool training) {
  if (training) cpu::require_batch_statistics<C, S>(batch, "etnn::nn::batch_norm");
  const double n = static_cast<double>(batch) * S;
  cpu::parallel_chunks(std::size_t{C}, 1, static_cast<std::size_t>(batch) * S, [&](std::size_t begin, std::size_t end) {
    for (int c = static_cast<int>(begin); c < static_cast<int>(end); ++c) {
      const auto st = cpu::channel_statistics<C, S>(x, running, batch, c, training);
      const double scale = gamma[c] * st.inv_std, shift = beta[c] - st.mean * scale;
      cpu::for_channel<C, S>(batch, c, [&](std::size_t i) { y[i] = static_cast<T>(x[i] * scale + shift); });
      if (training) {
        const double m = batch_norm_momentum;
        running[c] = static_cast<T>((1 - m) * running[c] + m * st.mean);
        running[C + c] = static_cast<T>((1 - m) * running[C + c] + m * st.var * n / (n - 1));
      }
    }
  });
  if (training) running[2 * C] += T(1);
}

template <int C, int S, class T>
void batch_norm_backward(Cpu, const T* gamma, T* gamma_grad, T* beta_grad, const T* running, const T* x, const T* dy,
                         T* dx, int batch, bool training) {
  const double n = static_cast<double>(batch) * S;
  cpu::parallel_chunks(std::size_t{C}, 1, static_cast<std::size_t>(batch) * S, [&](std::size_t begin, std::size_t end) {
    for (int c = static_cast<int>(begin); c < static_cast<int>(end); ++c) {
      const auto st = cpu::channel_statistics<C, S>(x, running, batch, c, training);
      double sum_dy = 0, sum_dy_xhat = 0;
      cpu::for_channel<C, S>(batch, c, [&](std::size_t i) {
        sum_dy += dy[i];
        sum_dy_xhat += dy[i] * (x[i] - st.mean) * st.inv_std;
      });
      gamma_grad[c] += static_cast<T>(sum_dy_xhat);
      beta_grad[c] += static_cast<T>(sum_dy);
      if (dx == nullptr) continue;
      const double k = gamma[c] * st.inv_std;
      const double mean_dy = training ? sum_dy / n : 0, mean_dy_xhat = training ? sum_dy_xhat / n : 0;
      cpu::for_channel<C, S>(batch, c, [&](std::size_t i) {
        const double xhat = (x[i] - st.mean) * st.inv_std;
        dx[i] = static_cast<T>(k * (dy[i] - mean_dy - xhat * mean_dy_xhat));
      });
    }
  });
}

}  // namespace etnn
