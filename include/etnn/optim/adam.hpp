#pragma once
// Private to optim/: include <etnn/optim/optim.hpp> or <etnn/etnn.hpp>.
// Adam and AdamW with the semantics of torch.optim.Adam / torch.optim.AdamW (their single-tensor
// and foreach implementations). Per parameter, at step t (from 1), with g the mean gradient over
// ranks (grad_scale * grads[i], clipped when the optimizer clips):
//   w = w (1 - lr wd)                            AdamW: decoupled weight decay
//   g = g + wd w                                 Adam: L2 penalty in the gradient
//   m = beta1 m + (1 - beta1) g                  exp_avg
//   v = beta2 v + (1 - beta2) g^2                exp_avg_sq
//   v_max = max(v_max, v)                        max_exp_avg_sq, with amsgrad (then v_max replaces v below)
//   w = w - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// The bias corrections and the step size are computed once per step in double, as PyTorch does in
// Python floats.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "optimizer.hpp"

namespace etnn::optim {

// Adam's and AdamW's hyper-parameters, which differ only in weight decay's meaning and default.
template <bool Decoupled>
struct AdamOptionsOf {
  float lr = 1e-3f;
  float beta1 = 0.9f;    // torch: betas[0]
  float beta2 = 0.999f;  // torch: betas[1]
  float eps = 1e-8f;
  float weight_decay = Decoupled ? 0.01f : 0.0f;
  bool amsgrad = false;
};
using AdamOptions = AdamOptionsOf<false>;
using AdamWOptions = AdamOptionsOf<true>;

namespace rules {

template <bool Decoupled>
struct AdamRule {
  using Options = AdamOptionsOf<Decoupled>;

  static void validate(const Options& o) {
    auto fail = [](const std::string& what) {
      std::string message = Decoupled ? "etnn::optim::AdamW: " : "etnn::optim::Adam: ";
      message += what;
      throw Error(message);
    };
    auto require = [&](bool ok, const char* what, float value) {
      if (ok) return;
      std::string message = what;
      message += ", got ";
      message += std::to_string(value);
      fail(message);
    };
    require(o.lr >= 0.0f, "lr must be >= 0", o.lr);
    require(o.beta1 >= 0.0f && o.beta1 < 1.0f, "beta1 must be in [0, 1)", o.beta1);
    require(o.beta2 >= 0.0f && o.beta2 < 1.0f, "beta2 must be in [0, 1)", o.beta2);
    require(o.eps >= 0.0f, "eps must be >= 0", o.eps);
    require(o.weight_decay >= 0.0f, "weight_decay must be >= 0", o.weight_decay);
  }

  static std::size_t state_slots(const Options& o) { return o.amsgrad ? 3 : 2; }
  static std::vector<std::string> state_names(const Options& o) {
    std::vector<std::string> names{"exp_avg", "exp_avg_sq"};
    if (o.amsgrad) names.emplace_back("max_exp_avg_sq");
    return names;
  }

  // The update of one parameter; amsgrad is a template argument, so that the loop over parameters
  // has no branch (the CPU's is vectorised at -O2 too).
  template <class T, bool Amsgrad>
  struct Update {
    T* w;
    const T* g;
    T* exp_avg;
    T* exp_avg_sq;
    T* max_exp_avg_sq;  // null without amsgrad
    T grad_scale;
    T l2;     // Adam: weight_decay; AdamW: 0
    T decay;  // AdamW: 1 - lr weight_decay; Adam: 1
    T beta1, one_minus_beta1, beta2, one_minus_beta2;
    T bias_correction2_sqrt, step_size, eps;

    ETNN_HD void operator()(std::size_t i) const {
      const T d = grad_scale * g[i] + l2 * w[i];
      const T m = beta1 * exp_avg[i] + one_minus_beta1 * d;
      T v = beta2 * exp_avg_sq[i] + one_minus_beta2 * d * d;
      exp_avg[i] = m;
      exp_avg_sq[i] = v;
      if constexpr (Amsgrad) {
        v = v > max_exp_avg_sq[i] ? v : max_exp_avg_sq[i];
        max_exp_avg_sq[i] = v;
      }
      const T denom = std::sqrt(v) / bias_correction2_sqrt + eps;
      w[i] = w[i] * decay - step_size * (m / denom);
    }
  };

  // run(update) with the update for these options and this step.
  template <class T, class Run>
  static void update(const Options& o, double lr, T* w, const T* g, T* state, std::size_t n, std::int64_t step,
                     T grad_scale, Run&& run) {
    if (o.amsgrad) {
      run(update_of<T, true>(o, lr, w, g, state, n, step, grad_scale));
    } else {
      run(update_of<T, false>(o, lr, w, g, state, n, step, grad_scale));
    }
  }

  template <class T, bool Amsgrad>
  static Update<T, Amsgrad> update_of(const Options& o, double lr, T* w, const T* g, T* state, std::size_t n,
                                      std::int64_t step, T grad_scale) {
    const double beta1 = o.beta1, beta2 = o.beta2, wd = o.weight_decay, t = static_cast<double>(step);
    const double bias_correction1 = 1.0 - std::pow(beta1, t);
    const double bias_correction2 = 1.0 - std::pow(beta2, t);
    return {w,
            g,
            state,
            state + n,
            Amsgrad ? state + 2 * n : nullptr,
            grad_scale,
            T(Decoupled ? 0.0 : wd),
            T(Decoupled ? 1.0 - lr * wd : 1.0),
            T(beta1),
            T(1.0 - beta1),
            T(beta2),
            T(1.0 - beta2),
            T(std::sqrt(bias_correction2)),
            T(lr / bias_correction1),
            T(o.eps)};
  }
};

using Adam = AdamRule<false>;
using AdamW = AdamRule<true>;

}  // namespace rules

// etnn::optim::Adam opt(model, {.lr = 1e-3f});                             single process
// etnn::optim::AdamW opt(model, {.lr = 1e-3f, .weight_decay = 0.05f}, world);   data parallel
template <class Model, class R = dist::Local>
class Adam : public Optimizer<rules::Adam, Model, R> {
 public:
  using Optimizer<rules::Adam, Model, R>::Optimizer;
};

template <class Model, class R = dist::Local>
class AdamW : public Optimizer<rules::AdamW, Model, R> {
 public:
  using Optimizer<rules::AdamW, Model, R>::Optimizer;
};

template <class Model>
Adam(Model&, const AdamOptions&) -> Adam<Model>;
template <class Model, class R>
Adam(Model&, const AdamOptions&, R&) -> Adam<Model, R>;
template <class Model, class R>
Adam(Model&, const AdamOptions&, R&, BucketOptions) -> Adam<Model, R>;

template <class Model>
AdamW(Model&, const AdamWOptions&) -> AdamW<Model>;
template <class Model, class R>
AdamW(Model&, const AdamWOptions&, R&) -> AdamW<Model, R>;
template <class Model, class R>
AdamW(Model&, const AdamWOptions&, R&, BucketOptions) -> AdamW<Model, R>;

}  // namespace etnn::optim
