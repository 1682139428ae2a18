#pragma once
// Private to optim/: include <etnn/optim/optim.hpp> or <etnn/etnn.hpp>.
// Stochastic gradient descent with momentum, dampening, Nesterov and weight decay, with
// PyTorch's torch.optim.SGD semantics (g: the mean gradient over ranks, grad_scale * grads[i]):
//   d = g + wd w
//   v = d on the first step, else mu v + (1 - dampening) d        (when mu != 0)
//   d = d + mu v if nesterov, else v                              (when mu != 0)
//   w = w - lr d                                                  (lr: options.lr as scheduled)
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "optimizer.hpp"

namespace etnn::optim {

struct SgdOptions {
  float lr = 0.01f;
  float momentum = 0.0f;
  float dampening = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
};

namespace rules {

struct Sgd {
  using Options = SgdOptions;

  static void validate(const Options& o) {
    auto fail = [](const std::string& what) { throw Error("etnn::optim::SGD: " + what); };
    if (!(o.lr >= 0.0f)) fail("lr must be >= 0, got " + std::to_string(o.lr));
    if (!(o.momentum >= 0.0f)) fail("momentum must be >= 0, got " + std::to_string(o.momentum));
    if (!(o.weight_decay >= 0.0f)) fail("weight_decay must be >= 0, got " + std::to_string(o.weight_decay));
    if (o.nesterov && (o.momentum <= 0.0f || o.dampening != 0.0f))
      fail("nesterov needs momentum > 0 and dampening = 0");
  }

  static std::size_t state_slots(const Options& o) { return o.momentum != 0.0f ? 1 : 0; }
  static std::vector<std::string> state_names(const Options& o) {
    return state_slots(o) > 0 ? std::vector<std::string>{"momentum_buffer"} : std::vector<std::string>{};
  }

  // The update of one parameter; the momentum variants are template arguments, so that the loop
  // over parameters has no branch (the CPU's is vectorised at -O2 too).
  enum class Momentum { none, first_step, heavy_ball, nesterov_first_step, nesterov };

  template <class T, Momentum M>
  struct Update {
    T* w;
    const T* g;
    T* velocity;  // null without momentum
    T lr, momentum, dampening, weight_decay, grad_scale;

    ETNN_HD void operator()(std::size_t i) const {
      T d = grad_scale * g[i] + weight_decay * w[i];
      if constexpr (M != Momentum::none) {
        constexpr bool first = M == Momentum::first_step || M == Momentum::nesterov_first_step;
        constexpr bool nesterov = M == Momentum::nesterov || M == Momentum::nesterov_first_step;
        T v;
        if constexpr (first) {
          v = d;
        } else {
          v = momentum * velocity[i] + (T(1) - dampening) * d;
        }
        velocity[i] = v;
        if constexpr (nesterov) {
          d = d + momentum * v;
        } else {
          d = v;
        }
      }
      w[i] -= lr * d;
    }
  };

  // run(update) with the update for these options and this step.
  template <class T, class Run>
  static void update(const Options& o, double lr, T* w, const T* g, T* state, std::size_t, std::int64_t step,
                     T grad_scale, Run&& run) {
    const auto with = [&]<Momentum M>() {
      run(Update<T, M>{w, g, state_slots(o) > 0 ? state : nullptr, T(lr), T(o.momentum), T(o.dampening),
                       T(o.weight_decay), grad_scale});
    };
    const bool first = step == 1;
    if (state_slots(o) == 0) {
      with.template operator()<Momentum::none>();
    } else if (o.nesterov) {
      first ? with.template operator()<Momentum::nesterov_first_step>() : with.template operator()<Momentum::nesterov>();
    } else {
      first ? with.template operator()<Momentum::first_step>() : with.template operator()<Momentum::heavy_ball>();
    }
  }
};

}  // namespace rules

// etnn::optim::SGD opt(model, {.lr = 0.01f, .momentum = 0.9f});           single process
// etnn::optim::SGD opt(model, {.lr = 0.01f}, world);                       data parallel
template <class Model, class R = dist::Local>
class SGD : public Optimizer<rules::Sgd, Model, R> {
 public:
  using Optimizer<rules::Sgd, Model, R>::Optimizer;
};

template <class Model>
SGD(Model&, const SgdOptions&) -> SGD<Model>;
template <class Model, class R>
SGD(Model&, const SgdOptions&, R&) -> SGD<Model, R>;
template <class Model, class R>
SGD(Model&, const SgdOptions&, R&, BucketOptions) -> SGD<Model, R>;

}  // namespace etnn::optim
