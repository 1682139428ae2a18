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
// sums in forward, three in backward). dx may be dy (in place). The per-value math is the ETNN_HD
// functors below, which the device runs too (cuda/batch_norm.hpp).
#include <array>
#include <cmath>
#include <cstddef>
#include <string>

#include "../core/cross_rank_sum.hpp"
#include "../core/device.hpp"
#include "../core/config.hpp"
#include "../core/error.hpp"
#include "executor.hpp"
#include "parallel.hpp"

namespace etnn {

inline constexpr double batch_norm_momentum = 0.1;
inline constexpr double batch_norm_eps = 1e-5;

// The per-value math of batch norm as ETNN_HD functors, which the CPU runs here and the device in
// cuda/batch_norm.hpp. Channel sums take term(c, i) for index i of channel c; the statistics are
// read through pointers: mean[C], inv_std[C], and the per-channel sums of the backward pass,
// gradient_sums[2 C] (sum of dy, then sum of dy xhat).
namespace detail {

// Index i of a (B, C, S) tensor belongs to channel (i / S) % C.
template <int C, int S>
ETNN_HD int channel_of(std::size_t i) {
  return static_cast<int>(i / S % C);
}

template <class T>
struct ChannelValue {  // x (or dy)
  const T* x;
  ETNN_HD double operator()(int, std::size_t i) const { return static_cast<double>(x[i]); }
};

template <class T>
struct CenteredSquare {  // (x - mu_c)^2, mu_c = sums[c] / count, count = sums[channels]
  const T* x;
  const double* sums;
  int channels;
  ETNN_HD double operator()(int c, std::size_t i) const {
    const double centred = x[i] - sums[c] / sums[channels];
    return centred * centred;
  }
};

template <class T>
struct GradientTimesXhat {  // dy xhat
  const T* x;
  const T* dy;
  const double* mean;
  const double* inv_std;
  ETNN_HD double operator()(int c, std::size_t i) const { return dy[i] * ((x[i] - mean[c]) * inv_std[c]); }
};

template <int C, int S, class T>
struct BatchNormalize {  // y = (x - mu) gamma / sqrt(var + eps) + beta
  const T* gamma;
  const T* beta;
  const double* mean;
  const double* inv_std;
  const T* x;
  T* y;
  ETNN_HD void operator()(std::size_t i) const {
    const int c = channel_of<C, S>(i);
    y[i] = static_cast<T>((x[i] - mean[c]) * (gamma[c] * inv_std[c]) + beta[c]);
  }
};

template <int C, class T>
struct AddBatchNormParameterGradients {  // dbeta += sum dy, dgamma += sum dy xhat (this rank's)
  const double* gradient_sums;
  T* gamma_grad;
  T* beta_grad;
  ETNN_HD void operator()(std::size_t c) const {
    beta_grad[c] += static_cast<T>(gradient_sums[c]);
    gamma_grad[c] += static_cast<T>(gradient_sums[C + c]);
  }
};

template <int C, int S, class T>
struct BatchNormInputGradient {  // dx = gamma inv_std (dy - mean(dy) - xhat mean(dy xhat)); eval: gamma inv_std dy
  const T* gamma;
  const double* mean;
  const double* inv_std;
  const double* gradient_sums;
  const double* count;
  const T* x;
  const T* dy;
  T* dx;
  bool training;
  ETNN_HD void operator()(std::size_t i) const {
    const int c = channel_of<C, S>(i);
    const double xhat = (x[i] - mean[c]) * inv_std[c];
    const double mean_dy = training ? gradient_sums[c] / *count : 0;
    const double mean_dy_xhat = training ? gradient_sums[C + c] / *count : 0;
    dx[i] = static_cast<T>(gamma[c] * inv_std[c] * (dy[i] - mean_dy - xhat * mean_dy_xhat));
  }
};

// running[c], running[C + c] moved toward channel c's batch mean and unbiased variance (var is
// the biased one over count values), and num_batches_tracked counted once (by channel 0).
template <int C, class T>
ETNN_HD void update_running_statistics(T* running, int c, double mean, double var, double count) {
  constexpr double m = batch_norm_momentum;
  running[c] = static_cast<T>((1 - m) * running[c] + m * mean);
  running[C + c] = static_cast<T>((1 - m) * running[C + c] + m * var * count / (count - 1));
  if (c == 0) running[2 * C] += T(1);
}

}  // namespace detail

namespace cpu {

// Calls f(i) for every index of channel c in a (B, C, S) tensor, in memory order.
template <int C, int S, class F>
void for_channel(int batch, int c, F&& f) {
  for (int b = 0; b < batch; ++b) {
    const std::size_t base = (static_cast<std::size_t>(b) * C + static_cast<std::size_t>(c)) * S;
    for (std::size_t s = 0; s < S; ++s) f(base + s);
  }
}

// sums[c] = sum over channel c's values of term(c, i), channels in parallel.
template <int C, int S, class Term>
void channel_sums(int batch, double* sums, const Term& term) {
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
    channel_sums<C, S>(batch, sums.data(), etnn::detail::ChannelValue<T>{x});
    sums[C] = static_cast<double>(batch) * S;
    sync(sums.data(), C + 1);
    st.count = sums[C];
    for (int c = 0; c < C; ++c) st.mean[c] = sums[c] / st.count;
    channel_sums<C, S>(batch, st.var.data(), etnn::detail::CenteredSquare<T>{x, sums.data(), C});
    sync(st.var.data(), C);
    for (int c = 0; c < C; ++c) st.var[c] /= st.count;
  } else {
    st.count = static_cast<double>(batch) * S;
    for (int c = 0; c < C; ++c) st.mean[c] = running[c], st.var[c] = running[C + c];
  }
  for (int c = 0; c < C; ++c) st.inv_std[c] = 1.0 / std::sqrt(st.var[c] + batch_norm_eps);
  return st;
}

}  // namespace cpu

// A training pass needs two or more values per channel (the unbiased variance divides by n - 1).
inline void check_batch_norm_count(double count, int batch) {
  if (count < 2)
    throw ShapeError("etnn::nn::batch_norm: training needs more than one value per channel, got a batch of " +
                     std::to_string(batch) + "; use a larger batch or eval()");
}

// running: [running_mean (C), running_var (C), num_batches_tracked (1)]; updated when training.
template <int C, int S, class T>
void batch_norm_forward(Cpu, const T* gamma, const T* beta, T* running, const T* x, T* y, int batch, bool training,
                        const CrossRankSum& sync) {
  const auto st = cpu::channel_statistics<C, S>(x, running, batch, training, sync);
  if (training) check_batch_norm_count(st.count, batch);
  for_each_index(Cpu{}, static_cast<std::size_t>(batch) * C * S,
                 detail::BatchNormalize<C, S, T>{gamma, beta, st.mean.data(), st.inv_std.data(), x, y});
  if (training)
    for (int c = 0; c < C; ++c) detail::update_running_statistics<C>(running, c, st.mean[c], st.var[c], st.count);
}

template <int C, int S, class T>
void batch_norm_backward(Cpu, const T* gamma, T* gamma_grad, T* beta_grad, const T* running, const T* x, const T* dy,
                         T* dx, int batch, bool training, const CrossRankSum& sync) {
  const auto st = cpu::channel_statistics<C, S>(x, running, batch, training, sync);
  std::array<double, 2 * C> sums;  // sum dy, then sum dy xhat, per channel
  cpu::channel_sums<C, S>(batch, sums.data(), detail::ChannelValue<T>{dy});
  cpu::channel_sums<C, S>(batch, sums.data() + C,
                          detail::GradientTimesXhat<T>{x, dy, st.mean.data(), st.inv_std.data()});
  for (std::size_t c = 0; c < C; ++c)
    detail::AddBatchNormParameterGradients<C, T>{sums.data(), gamma_grad, beta_grad}(c);
  if (dx == nullptr) return;
  if (training) sync(sums.data(), 2 * C);
  for_each_index(Cpu{}, static_cast<std::size_t>(batch) * C * S,
                 detail::BatchNormInputGradient<C, S, T>{gamma, st.mean.data(), st.inv_std.data(), sums.data(),
                                                         &st.count, x, dy, dx, training});
}

}  // namespace etnn
