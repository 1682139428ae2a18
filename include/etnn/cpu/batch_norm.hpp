#pragma once
// Batch normalisation on the CPU, PyTorch's nn.BatchNorm1d/2d with momentum 0.1 and eps 1e-5.
//   x, y: (B, C, S) with S the spatial size (1 after a linear layer)   gamma, beta: (C)
//   training:  mu_c, var_c = mean and biased variance of x[:, c, :] over n = B S values (over the
//              global batch of every rank when `sync` is set: nn.SyncBatchNorm)
//              running_mean = (1 - m) running_mean + m mu_c
//              running_var  = (1 - m) running_var + m var_c n / (n - 1)   (unbiased, as PyTorch)
//   eval:      mu_c, var_c = running_mean, running_var
//   y = gamma_c (x - mu_c) / sqrt(var_c + eps) + beta_c
// Backward, with xhat = (x - mu) / sqrt(var + eps):
//   dbeta += sum dy,  dgamma += sum dy xhat                         (this rank's samples)
//   training:  dx = gamma / sqrt(var + eps) (dy - mean(dy) - xhat mean(dy xhat))   means over n
//   eval:      dx = gamma / sqrt(var + eps) dy
// Backward recomputes the batch statistics from x instead of keeping them. Per-channel sums run
// over channels in parallel, accumulated in double; `sync` sums them over ranks in between (two
// sums in forward, three in backward). dx may be dy (in place).
#include <array>
#include <cmath>
#include <cstddef>
#include <string>

#include "../core/cross_rank_sum.hpp"
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

// sums[c] = sum over channel c's values of term(i), channels in parallel.
template <int C, int S, class Term>
void channel_sums(int batch, double* sums, Term&& term) {
  parallel_chunks(std::size_t{C}, 1, static_cast<std::size_t>(batch) * S, [&](std::size_t begin, std::size_t end) {
    for (int c = static_cast<int>(begin); c < static_cast<int>(end); ++c) {
      double sum = 0;
      for_channel<C, S>(batch, c, [&](std::size_t i) { sum += term(c, i); });
      sums[c] = sum;
    }
  });
}

template <int C>
struct ChannelStatistics {
  std::array<double, C> mean, var, inv_std;
  double count;  // values per channel (over all ranks when synchronised)
};

// This batch's statistics (summed over ranks by `sync`) when training, else the running ones.
template <int C, int S, class T>
ChannelStatistics<C> channel_statistics(const T* x, const T* running, int batch, bool training,
                                        const CrossRankSum& sync) {
  ChannelStatistics<C> st;
  if (training) {
    std::array<double, C + 1> sums;  // sum of x per channel, then the count
    channel_sums<C, S>(batch, sums.data(), [&](int, std::size_t i) { return static_cast<double>(x[i]); });
    sums[C] = static_cast<double>(batch) * S;
    sync(sums.data(), C + 1);
    st.count = sums[C];
    for (int c = 0; c < C; ++c) st.mean[c] = sums[c] / st.count;
    channel_sums<C, S>(batch, st.var.data(), [&](int c, std::size_t i) { return (x[i] - st.mean[c]) * (x[i] - st.mean[c]); });
    sync(st.var.data(), C);
    for (int c = 0; c < C; ++c) st.var[c] /= st.count;
  } else {
    st.count = static_cast<double>(batch) * S;
    for (int c = 0; c < C; ++c) st.mean[c] = running[c], st.var[c] = running[C + c];
  }
  for (int c = 0; c < C; ++c) st.inv_std[c] = 1.0 / std::sqrt(st.var[c] + batch_norm_eps);
  return st;
}

// Calls f(c, i) for every index of every channel, channels in parallel.
template <int C, int S, class F>
void for_each_channel_value(int batch, F&& f) {
  parallel_chunks(std::size_t{C}, 1, static_cast<std::size_t>(batch) * S, [&](std::size_t begin, std::size_t end) {
    for (int c = static_cast<int>(begin); c < static_cast<int>(end); ++c)
      for_channel<C, S>(batch, c, [&](std::size_t i) { f(c, i); });
  });
}

}  // namespace cpu

// running: [running_mean (C), running_var (C), num_batches_tracked (1)]; updated when training.
template <int C, int S, class T>
void batch_norm_forward(Cpu, const T* gamma, const T* beta, T* running, const T* x, T* y, int batch, bool training,
                        const CrossRankSum& sync) {
  const auto st = cpu::channel_statistics<C, S>(x, running, batch, training, sync);
  if (training && st.count < 2)
    throw ShapeError("etnn::nn::batch_norm: training needs more than one value per channel, got a batch of " +
                     std::to_string(batch) + "; use a larger batch or eval()");
  cpu::for_each_channel_value<C, S>(batch, [&](int c, std::size_t i) {
    const double scale = gamma[c] * st.inv_std[c];
    y[i] = static_cast<T>((x[i] - st.mean[c]) * scale + beta[c]);
  });
  if (!training) return;
  const double m = batch_norm_momentum;
  for (int c = 0; c < C; ++c) {
    running[c] = static_cast<T>((1 - m) * running[c] + m * st.mean[c]);
    running[C + c] = static_cast<T>((1 - m) * running[C + c] + m * st.var[c] * st.count / (st.count - 1));
  }
  running[2 * C] += T(1);
}

template <int C, int S, class T>
void batch_norm_backward(Cpu, const T* gamma, T* gamma_grad, T* beta_grad, const T* running, const T* x, const T* dy,
                         T* dx, int batch, bool training, const CrossRankSum& sync) {
  const auto st = cpu::channel_statistics<C, S>(x, running, batch, training, sync);
  const auto xhat = [&](int c, std::size_t i) { return (x[i] - st.mean[c]) * st.inv_std[c]; };
  std::array<double, 2 * C> sums;  // sum dy, then sum dy xhat, per channel
  cpu::channel_sums<C, S>(batch, sums.data(), [&](int, std::size_t i) { return static_cast<double>(dy[i]); });
  cpu::channel_sums<C, S>(batch, sums.data() + C, [&](int c, std::size_t i) { return dy[i] * xhat(c, i); });
  for (int c = 0; c < C; ++c) {
    beta_grad[c] += static_cast<T>(sums[c]);
    gamma_grad[c] += static_cast<T>(sums[C + c]);
  }
  if (dx == nullptr) return;
  if (training) sync(sums.data(), 2 * C);
  cpu::for_each_channel_value<C, S>(batch, [&](int c, std::size_t i) {
    const double mean_dy = training ? sums[c] / st.count : 0, mean_dy_xhat = training ? sums[C + c] / st.count : 0;
    dx[i] = static_cast<T>(gamma[c] * st.inv_std[c] * (dy[i] - mean_dy - xhat(c, i) * mean_dy_xhat));
  });
}

}  // namespace etnn
