#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// Kullback-Leibler divergence (PyTorch's KLDivLoss), value and gradient in one pass.
//   x: (B, S...) log-probabilities (the model's)   t: (B, S...) probabilities, or log-probabilities
//   with log_target
//   l_i = t_i log t_i - t_i x_i   (t log t = 0 at t = 0)   log_target: l_i = exp(t_i) (t_i - x_i)
//   loss = r sum_i l_i    r = 1/B (batchmean, default), 1/n (mean, n = B * S::size) or 1 (sum)
//   dL/dx_i = -r t_i                                     log_target: -r exp(t_i)
// batchmean is the KL divergence per sample, sum_i t_i log(t_i / p_i) averaged over the batch;
// PyTorch defaults to mean (which divides by the class count too) and recommends batchmean.
#include <cmath>
#include <cstddef>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../tensor/tensor.hpp"
#include "target_loss.hpp"
#include "targets.hpp"

namespace etnn::loss {

namespace detail {
// The terms for targets t given as probabilities and as log-probabilities (x: log-probabilities).
struct KlTarget {
  template <class T>
  ETNN_HD Term<T> operator()(T x, T t) const {
    return {(t == T(0) ? T(0) : t * std::log(t)) - t * x, -t};
  }
};
struct KlLogTarget {
  template <class T>
  ETNN_HD Term<T> operator()(T x, T t) const {
    const T p = std::exp(t);
    return {p * (t - x), -p};
  }
};
}  // namespace detail

// KLDivLoss's reduction: PyTorch's 'batchmean', 'mean' or 'sum'.
enum class KLDivReduction { batchmean, mean, sum };

struct KLDivOptions {
  KLDivReduction reduction = KLDivReduction::batchmean;
  bool log_target = false;  // targets given as log-probabilities
};

class KLDiv : public detail::TensorTargetLoss<KLDiv> {
 public:
  using target_kind = RealValues;
  using Options = KLDivOptions;

  explicit KLDiv(Options options = {}) : options_(options) {}
  const Options& options() const noexcept { return options_; }

 private:
  friend detail::TensorTargetLoss<KLDiv>;

  template <class Device, class T, ShapeType S, ShapeType TS>
  auto compute(Device device, TensorView<const T, S, Device> log_probs, TensorView<const T, TS, Device> target, T* grad) const {
    detail::check_targets(log_probs, target, "etnn::loss::KLDiv");
    const std::size_t count = options_.reduction == KLDivReduction::batchmean
                                  ? static_cast<std::size_t>(log_probs.batch())
                                  : log_probs.size();
    const T scale = options_.reduction == KLDivReduction::sum ? T(1) : T(1) / static_cast<T>(count);
    if (options_.log_target) return elementwise_loss(device, log_probs, target, grad, scale, detail::KlLogTarget{});
    return elementwise_loss(device, log_probs, target, grad, scale, detail::KlTarget{});
  }

  Options options_;
};

}  // namespace etnn::loss
