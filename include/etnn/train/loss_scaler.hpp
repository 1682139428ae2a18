#pragma once
// Private to train/: include <etnn/train/train.hpp> or <etnn/etnn.hpp>.
// Dynamic loss scaling: etnn::LossScaling, its options, and train::detail::LossScaler, which keeps
// the scale by torch.cuda.amp.GradScaler's rules for the Trainer.
#include <cmath>
#include <string>

#include "../core/error.hpp"
#include "../core/precision.hpp"
#include "../backend/executor.hpp"
#include "../expr/expression.hpp"
#include "../optim/parameter_set.hpp"

namespace etnn {

// Whether the Trainer scales the loss by default: for fp16 products (etnn::fp16 and
// etnn::fp16_unfused), whose exponent range is narrow.
template <class Scalar>
inline constexpr bool loss_scaled_by_default = products_of<Scalar> == Products::fp16;

// Dynamic loss scaling (torch.cuda.amp.GradScaler, with its defaults). Each step multiplies the
// loss's gradient by the scale S before backward, so that gradients too small for fp16 products
// (below 2^-24) survive them; the gradients reduced across ranks are divided by S before the
// update (one pass over them), so the update, clipping and gradients() after the step see the
// true gradients. A step whose gradients overflow (the loss finite, S above 1) is skipped by the
// non-finite guard and S multiplied by backoff_factor; after growth_interval updates in a row, S
// is multiplied by growth_factor (while it stays finite). Powers of two (the default factors)
// make the scaling exact: a model that never overflows trains as it would unscaled.
struct LossScaling {
  bool enabled = true;
  float init_scale = 65536.0f;  // 2^16
  float growth_factor = 2.0f;   // > 1
  float backoff_factor = 0.5f;  // in (0, 1)
  int growth_interval = 2000;   // >= 1
};

namespace train::detail {

// The scale S of a training run and the updates made at it; S is 1 while scaling is off.
class LossScaler {
 public:
  // scaling: the Trainer's resolved options; guarded: whether the non-finite guard, which skips
  // the steps whose gradients overflow, is on (TrainerOptions::skip_non_finite).
  LossScaler(const LossScaling& scaling, bool guarded)
      : scaling_(checked(scaling, guarded)), scale_(scaling.enabled ? scaling.init_scale : 1.0f) {}

  bool on() const noexcept { return scaling_.enabled; }
  float scale() const noexcept { return scale_; }
  int updates_at_scale() const noexcept { return updates_at_scale_; }

  // Resumes a run at a scale and a count of updates at it (a training checkpoint's).
  void restore(float scale, int updates_at_scale) {
    if (!on())
      throw Error("etnn::Trainer: a loss scale (" + std::to_string(scale) +
                  ") for a trainer without loss scaling; turn TrainerOptions::loss_scaling on to resume it");
    if (!(scale > 0.0f) || !std::isfinite(scale))
      throw Error("etnn::Trainer: the loss scale must be finite and > 0, got " + std::to_string(scale));
    const int interval = scaling_.growth_interval;
    if (updates_at_scale < 0 || updates_at_scale >= interval)
      throw Error("etnn::Trainer: " + std::to_string(updates_at_scale) + " updates at the loss scale, outside [0, " +
                  std::to_string(interval) + ") (growth_interval)");
    scale_ = scale;
    updates_at_scale_ = updates_at_scale;
  }

  // The reduced gradients of a parameter set (a model, a parametric loss) divided by S, while on.
  template <optim::ParameterSet Params>
  void unscale(Params& params) const {
    if (!on()) return;
    using T = typename Params::value_type;
    const T inverse = T(1) / static_cast<T>(scale_);
    assign(typename Params::device{}, params.gradients(), expr::ref(params.gradients(), Params::flat_size) * inverse);
  }

  // After each update window; returns whether a skipped step was an overflow: one that scaling
  // explains, the loss finite on every rank and S above 1 making the gradients overflow. An
  // overflow backs S off (so it stays above min(init_scale, backoff_factor)); an update counts
  // toward growth; another skipped step changes nothing.
  bool update(bool skipped, bool loss_finite_on_every_rank) {
    if (!on()) return false;
    const bool overflow = skipped && loss_finite_on_every_rank && scale_ > 1.0f;
    if (overflow) {
      scale_ *= scaling_.backoff_factor;
      updates_at_scale_ = 0;
    } else if (!skipped && ++updates_at_scale_ == scaling_.growth_interval) {
      const float grown = scale_ * scaling_.growth_factor;
      if (std::isfinite(grown)) scale_ = grown;
      updates_at_scale_ = 0;
    }
    return overflow;
  }

 private:
  static LossScaling checked(const LossScaling& scaling, bool guarded) {
    if (!scaling.enabled) return scaling;
    const auto bad = [](const char* what, double value) {
      throw Error(std::string("etnn::Trainer: loss scaling's ") + what + ", got " + std::to_string(value));
    };
    if (!(scaling.init_scale > 0.0f) || !std::isfinite(scaling.init_scale))
      bad("init_scale must be finite and > 0", scaling.init_scale);
    if (!(scaling.growth_factor > 1.0f) || !std::isfinite(scaling.growth_factor))
      bad("growth_factor must be finite and > 1", scaling.growth_factor);
    if (!(scaling.backoff_factor > 0.0f && scaling.backoff_factor < 1.0f))
      bad("backoff_factor must be in (0, 1)", scaling.backoff_factor);
    if (scaling.growth_interval < 1) bad("growth_interval must be >= 1", scaling.growth_interval);
    if (!guarded)
      throw Error("etnn::Trainer: loss scaling skips the steps whose gradients overflow, which needs the non-finite "
                  "guard: leave skip_non_finite on, or turn loss scaling off");
    return scaling;
  }

  LossScaling scaling_;
  float scale_;                // S
  int updates_at_scale_ = 0;  // updates in a row at S
};

}  // namespace train::detail
}  // namespace etnn
