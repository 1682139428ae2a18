#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
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
// sums in forward, three in backward); it is any callable that says whether it sums (explicit
// bool) and replaces sync(values, n) by their sum over ranks (nn passes dist::CrossRankSum).
// dx may be dy (in place). The per-value math is the ETNN_HD functors of expr/batch_norm.hpp,
// which the device runs too (cuda/batch_norm.hpp).
#include <array>
#include <cmath>
#include <cstddef>
#include <string>

#include "../core/device.hpp"
#include "../core/config.hpp"
#include "../expr/batch_norm.hpp"
#include "../core/error.hpp"
#include "executor.hpp"
#include "parallel.hpp"

namespace etnn {

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
template <int C, int S, class T, class Sum>
ChannelStatistics<C> channel_statistics(const T* x, const T* running, int batch, bool training,
                                        const Sum& sync) {
  ChannelStatistics<C> st;
  if (training) {
    std::array<double, C + 1> sums;  // sum of x per channel, then the count
    channel_sums<C, S>(batch, sums.data(), expr::detail::ChannelValue<T>{x});
    sums[C] = static_cast<double>(batch) * S;
    sync(sums.data(), C + 1);
    st.count = sums[C];
    for (int c = 0; c < C; ++c) st.mean[c] = sums[c] / st.count;
    channel_sums<C, S>(batch, st.var.data(), expr::detail::CenteredSquare<T>{x, sums.data(), C});
    sync(st.var.data(), C);
    for (int c = 0; c < C; ++c) st.var[c] /= st.count;
  } else {
    st.count = static_cast<double>(batch) * S;
    for (int c = 0; c < C; ++c) st.mean[c] = running[c], st.var[c] = running[expr::detail::running_var_at<C> + c];
  }
  for (int c = 0; c < C; ++c) st.inv_std[c] = 1.0 / std::sqrt(st.var[c] + expr::batch_norm_eps);
  return st;
}

}  // namespace cpu

// running: running_mean, running_var, num_batches_tracked (expr::detail::running_var_at); updated
// when training.
template <int C, int S, class T, class Sum>
void batch_norm_forward(Cpu, const T* gamma, const T* beta, T* running, const T* x, T* y, int batch, bool training,
                        const Sum& sync) {
  const auto st = cpu::channel_statistics<C, S>(x, running, batch, training, sync);
  if (training) expr::check_batch_norm_count(st.count, batch);
  for_each_index(Cpu{}, static_cast<std::size_t>(batch) * C * S,
                 expr::detail::BatchNormalize<C, S, T>{gamma, beta, st.mean.data(), st.inv_std.data(), x, y});
  if (training)
    for (int c = 0; c < C; ++c) expr::detail::update_running_statistics<C>(running, c, st.mean[c], st.var[c], st.count);
}

template <int C, int S, class T, class Sum>
void batch_norm_backward(Cpu, const T* gamma, T* gamma_grad, T* beta_grad, const T* running, const T* x, const T* dy,
                         T* dx, int batch, bool training, const Sum& sync) {
  const auto st = cpu::channel_statistics<C, S>(x, running, batch, training, sync);
  std::array<double, 2 * C> sums;  // sum dy, then sum dy xhat, per channel
  cpu::channel_sums<C, S>(batch, sums.data(), expr::detail::ChannelValue<T>{dy});
  cpu::channel_sums<C, S>(batch, sums.data() + C,
                          expr::detail::GradientTimesXhat<T>{x, dy, st.mean.data(), st.inv_std.data()});
  for (std::size_t c = 0; c < C; ++c)
    expr::detail::AddBatchNormParameterGradients<C, T>{sums.data(), gamma_grad, beta_grad}(c);
  if (dx == nullptr) return;
  if (training) sync(sums.data(), 2 * C);
  for_each_index(Cpu{}, static_cast<std::size_t>(batch) * C * S,
                 expr::detail::BatchNormInputGradient<C, S, T>{gamma, st.mean.data(), st.inv_std.data(), sums.data(),
                                                         &st.count, x, dy, dx, training});
}

}  // namespace etnn
