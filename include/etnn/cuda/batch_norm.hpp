#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// Batch normalisation on the device, with the CPU's semantics and the per-value ETNN_HD functors
// both run (expr/batch_norm.hpp):
//   x, y: (B, C, S)   per-channel sums over n = B S values, in double
//   training:  mu_c, var_c from this batch (summed over ranks by `sync`), running ones updated
//   eval:      mu_c, var_c = running_mean, running_var
//   y = gamma_c (x - mu_c) / sqrt(var_c + eps) + beta_c
//   backward:  dbeta += sum dy, dgamma += sum dy xhat,
//              dx = gamma / sqrt(var + eps) (dy - mean(dy) - xhat mean(dy xhat))   (eval: the first term)
// Each channel's sum is one block (a fixed tree, so the same on every run); the statistics are
// finished and the running ones updated by a kernel too, so a pass never waits for the host and
// can be recorded as a CUDA graph. The per-channel values live in one device buffer per channel
// count and host thread (cuda/per_thread.hpp), allocated on first use (a Trainer's reserve() makes
// that use); a thread's work on etnn's stream runs in the order it was enqueued, so that thread's
// layers with the same channel count share it safely.
// `sync` (SyncBatchNorm) sums the device values through the reducer: etnn::dist::Nccl.
#include <cstddef>
#include <string>

#include "../core/device.hpp"
#include "../core/error.hpp"
#include "../expr/batch_norm.hpp"
#include "../tensor/buffer.hpp"
#include "executor.hpp"
#include "per_thread.hpp"
#include "reduce.hpp"
#include "runtime.hpp"

namespace etnn {

namespace cuda::detail {

// The device values of a batch norm with C channels:
//   sums[C + 1] (sum of x per channel, then the count), squares[C] (sum of (x - mu)^2),
//   mean[C], inv_std[C], gradient_sums[2 C] (sum of dy, then sum of dy xhat, per channel)
template <int C>
struct BatchNormValues {
  double* sums;
  double* squares;
  double* mean;
  double* inv_std;
  double* gradient_sums;
};

template <int C>
struct BatchNormStorage {
  Buffer<double, Cuda> values{6 * std::size_t{C} + 1};
};

template <int C>
BatchNormValues<C> batch_norm_values() {
  double* v = per_thread<BatchNormStorage<C>>().values.data();
  return {v, v + C + 1, v + 2 * C + 1, v + 3 * C + 1, v + 4 * C + 1};
}

// out[c] = sum over channel c's values i of term(c, i); block c sums channel c in a fixed order.
// With `count`, out[C] = B S as well (the count the statistics divide by).
template <int C, int S, class Term>
__global__ void channel_sums_kernel(int batch, Term term, double* out, bool count) {
  const int c = static_cast<int>(blockIdx.x);
  const std::size_t values = static_cast<std::size_t>(batch) * S;
  double sum = 0;
  for (std::size_t k = threadIdx.x; k < values; k += blockDim.x) {
    const std::size_t b = k / S, s = k % S;
    sum += term(c, (b * C + static_cast<std::size_t>(c)) * S + s);
  }
  const double total = block_sum(sum);
  if (threadIdx.x == 0) {
    out[c] = total;
    if (count && c == 0) out[C] = static_cast<double>(values);
  }
}

template <int C, int S, class Term>
void channel_sums(int batch, const Term& term, double* out, bool count = false) {
  launch("etnn::batch_norm channel_sums", channel_sums_kernel<C, S, Term>, {C, reduction_threads}, batch, term, out,
         count);
}

// mean, inv_std from this batch's sums (training) or the running statistics (eval); in a training
// forward pass the running statistics too, as cpu/batch_norm.hpp updates them. A grid-stride loop over the channels.
template <int C, class T>
__global__ void finish_statistics_kernel(BatchNormValues<C> v, T* running, bool training, bool update_running) {
  for (const std::size_t channel : grid_stride(std::size_t{C})) {
    const int c = static_cast<int>(channel);
    double mean, var;
    if (training) {
      const double count = v.sums[C];
      mean = v.sums[c] / count;
      var = v.squares[c] / count;
      if (update_running) expr::detail::update_running_statistics<C>(running, c, mean, var, count);
    } else {
      mean = running[c];
      var = running[expr::detail::running_var_at<C> + c];
    }
    v.mean[c] = mean;
    v.inv_std[c] = 1.0 / sqrt(var + expr::batch_norm_eps);
  }
}

// The statistics of cpu::channel_statistics (cpu/batch_norm.hpp) into v.mean and v.inv_std, on the device.
template <int C, int S, class T, class Sum>
void statistics(const BatchNormValues<C>& v, const T* x, T* running, int batch, bool training, bool update_running,
                const Sum& sync) {
  if (training) {
    channel_sums<C, S>(batch, expr::detail::ChannelValue<T>{x}, v.sums, true);
    sync(v.sums, C + 1);
    channel_sums<C, S>(batch, expr::detail::CenteredSquare<T>{x, v.sums, C}, v.squares);
    sync(v.squares, C);
  }
  constexpr unsigned threads = 128;
  launch("etnn::batch_norm statistics", finish_statistics_kernel<C, T>, {(C + threads - 1) / threads, threads}, v,
         running, training, update_running);
}

}  // namespace cuda::detail

// running: running_mean, running_var, num_batches_tracked (expr::detail::running_var_at); updated
// when training.
template <int C, int S, class T, class Sum>
void batch_norm_forward(Cuda, const T* gamma, const T* beta, T* running, const T* x, T* y, int batch, bool training,
                        const Sum& sync) {
  // Without sync the count is this batch's. With it the count is summed on the device, where it
  // cannot be checked without waiting for it; a Trainer's synchronised step always has at least 2
  // (it takes no empty batch, and syncs only across 2 or more ranks).
  if (training && !sync) expr::check_batch_norm_count(static_cast<double>(batch) * S, batch);
  const auto v = cuda::detail::batch_norm_values<C>();
  cuda::detail::statistics<C, S>(v, x, running, batch, training, true, sync);
  for_each_index(Cuda{}, static_cast<std::size_t>(batch) * C * S,
                 expr::detail::BatchNormalize<C, S, T>{gamma, beta, v.mean, v.inv_std, x, y});
}

template <int C, int S, class T, class Sum>
void batch_norm_backward(Cuda, const T* gamma, T* gamma_grad, T* beta_grad, const T* running, const T* x, const T* dy,
                         T* dx, int batch, bool training, const Sum& sync) {
  const auto v = cuda::detail::batch_norm_values<C>();
  // Recomputed as forward computed them; the running statistics are not updated again.
  cuda::detail::statistics<C, S>(v, x, const_cast<T*>(running), batch, training, false, sync);
  cuda::detail::channel_sums<C, S>(batch, expr::detail::ChannelValue<T>{dy}, v.gradient_sums);
  cuda::detail::channel_sums<C, S>(batch, expr::detail::GradientTimesXhat<T>{x, dy, v.mean, v.inv_std},
                                   v.gradient_sums + C);
  for_each_index(Cuda{}, std::size_t{C},
                 expr::detail::AddBatchNormParameterGradients<C, T>{v.gradient_sums, gamma_grad, beta_grad});
  if (dx == nullptr) return;
  if (training) sync(v.gradient_sums, 2 * C);
  for_each_index(Cuda{}, static_cast<std::size_t>(batch) * C * S,
                 expr::detail::BatchNormInputGradient<C, S, T>{gamma, v.mean, v.inv_std, v.gradient_sums, v.sums + C, x, dy,
                                                         dx, training});
}

}  // namespace etnn
