#pragma once
// Private to expr/: include <etnn/expr/expr.hpp> or <etnn/etnn.hpp>.
// The per-value math of batch normalisation (PyTorch's nn.BatchNorm1d/2d, momentum 0.1, eps 1e-5)
// as ETNN_HD functors, device-neutral: the CPU runs them in cpu/batch_norm.hpp, the device in
// cuda/batch_norm.hpp, so both compute the same values.
//   x, y: (B, C, S) with S the spatial size   gamma, beta: (C)   sums accumulated in double
#include <cstddef>
#include <string>

#include "../core/alignment.hpp"
#include "../core/config.hpp"
#include "../core/error.hpp"

namespace etnn::expr {

inline constexpr double batch_norm_momentum = 0.1;
inline constexpr double batch_norm_eps = 1e-5;

// A training pass needs two or more values per channel (the unbiased variance divides by n - 1).
inline void check_batch_norm_count(double count, int batch) {
  if (count < 2)
    throw ShapeError("etnn::nn::batch_norm: training needs more than one value per channel, got a batch of " +
                     std::to_string(batch) + "; use a larger batch or eval()");
}

// Channel sums take term(c, i) for index i of channel c; the statistics are
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

// The running statistics of C channels, one array of buffers, each tensor aligned
// (core/alignment.hpp): running_mean (C) at 0, running_var (C) at running_var_at<C>, and
// num_batches_tracked (1) at batches_tracked_at<C>.
template <int C>
inline constexpr std::size_t running_var_at = aligned_values(std::size_t{C});
template <int C>
inline constexpr std::size_t batches_tracked_at = 2 * aligned_values(std::size_t{C});

// running_mean[c], running_var[c] moved toward channel c's batch mean and unbiased variance (var
// is the biased one over count values), and num_batches_tracked counted once (by channel 0).
template <int C, class T>
ETNN_HD void update_running_statistics(T* running, int c, double mean, double var, double count) {
  constexpr double m = batch_norm_momentum;
  T* running_var = running + running_var_at<C>;
  running[c] = static_cast<T>((1 - m) * running[c] + m * mean);
  running_var[c] = static_cast<T>((1 - m) * running_var[c] + m * var * count / (count - 1));
  if (c == 0) running[batches_tracked_at<C>] += T(1);
}

}  // namespace detail

}  // namespace etnn::expr
