#pragma once
// Private to optim/: include <etnn/optim/optim.hpp> or <etnn/etnn.hpp>.
// Learning-rate schedules: the lr of an optimizer step as a pure function of s, the number of
// steps done before it (s = 0 for the first step), and of base = the optimizer's options().lr.
// A training state keeps the step count, so a resumed run continues the schedule exactly.
//   opt.set_schedule(etnn::optim::schedule::CosineWarmup{.warmup = 100, .total = 10000});
//   opt.learning_rate();   // the lr the next step uses
//
//   Constant       lr(s) = base                                                  (the default)
//   StepDecay      lr(s) = base gamma^floor(s / step_size)         torch StepLR, stepped once per optimizer step
//   CosineWarmup   lr(s) = base (s + 1) / warmup                   s < warmup
//                  lr(s) = min_lr + (base - min_lr) (1 + cos(pi (s - warmup) / (total - warmup))) / 2
//                                                                  warmup <= s < total
//                  lr(s) = min_lr                                  s >= total
//                  torch: LinearLR(start_factor = 1/warmup, total_iters = warmup - 1) for the warm-up, then
//                  CosineAnnealingLR(T_max = total - warmup, eta_min = min_lr), which would rise again past total
//   OneCycle       torch OneCycleLR's lr (two phases, cosine annealing; ignores base):
//                  initial = max_lr / div_factor, final = initial / final_div_factor, p = pct_start total - 1
//                  lr(s) = anneal(initial, max_lr, s / p)                              s <= p
//                  lr(s) = anneal(max_lr, final, (s - p) / (total - 1 - p))            p < s < total
//                  lr(s) = final                                                       s >= total (torch raises)
//                  anneal(a, b, x) = b + (a - b) / 2 (1 + cos(pi x))
//                  Only the lr cycles: OneCycleLR's momentum (or beta1) cycling is not done.
// Every schedule is a plain struct; Schedule, their std::variant, allocates nothing.
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <variant>

#include "../core/error.hpp"

namespace etnn::optim::schedule {

namespace detail {
[[noreturn]] inline void fail(const char* schedule, const std::string& what) {
  std::string message = "etnn::optim::schedule::";
  message += schedule;
  message += ": ";
  message += what;
  throw Error(message);
}
// "<requirement>, got <value>"
template <class Value>
std::string got(const char* requirement, Value value) {
  std::string text = requirement;
  text += ", got ";
  text += std::to_string(value);
  return text;
}
}  // namespace detail

struct Constant {
  void validate() const {}
  double lr(double base, std::int64_t) const { return base; }
};

struct StepDecay {
  std::int64_t step_size = 0;  // optimizer steps between decays (required)
  double gamma = 0.1;

  void validate() const {
    if (step_size < 1) detail::fail("StepDecay", detail::got("step_size must be >= 1", step_size));
    if (!(gamma >= 0.0)) detail::fail("StepDecay", detail::got("gamma must be >= 0", gamma));
  }
  double lr(double base, std::int64_t s) const {
    return base * std::pow(gamma, static_cast<double>(s / step_size));
  }
};

struct CosineWarmup {
  std::int64_t warmup = 0;  // steps of linear warm-up
  std::int64_t total = 0;   // steps until min_lr is reached (required, > warmup)
  double min_lr = 0.0;

  void validate() const {
    if (warmup < 0) detail::fail("CosineWarmup", detail::got("warmup must be >= 0", warmup));
    if (total <= warmup) {
      std::string what = "total (";
      what += std::to_string(total);
      what += ") must exceed warmup (";
      what += std::to_string(warmup);
      what += "): set .total to the run's optimizer steps";
      detail::fail("CosineWarmup", what);
    }
    if (!(min_lr >= 0.0)) detail::fail("CosineWarmup", detail::got("min_lr must be >= 0", min_lr));
  }
  double lr(double base, std::int64_t s) const {
    if (s < warmup) return base * static_cast<double>(s + 1) / static_cast<double>(warmup);
    if (s >= total) return min_lr;
    const double x = static_cast<double>(s - warmup) / static_cast<double>(total - warmup);
    return min_lr + (base - min_lr) * (1.0 + std::cos(std::numbers::pi * x)) / 2.0;
  }
};

struct OneCycle {
  double max_lr = 0.0;      // required
  std::int64_t total = 0;   // the run's optimizer steps (required)
  double pct_start = 0.3;   // fraction of the steps spent rising
  double div_factor = 25.0;
  double final_div_factor = 1e4;

  void validate() const {
    if (!(max_lr > 0.0)) detail::fail("OneCycle", detail::got("max_lr must be > 0", max_lr));
    if (total < 1) detail::fail("OneCycle", detail::got("total must be >= 1", total));
    if (!(pct_start > 0.0 && pct_start < 1.0)) detail::fail("OneCycle", detail::got("pct_start must be in (0, 1)", pct_start));
    if (!(pct_start * static_cast<double>(total) > 1.0))
      detail::fail("OneCycle", detail::got("pct_start * total must exceed 1 so that the rise lasts more than one step",
                                           pct_start * static_cast<double>(total)));
    if (!(div_factor > 0.0)) detail::fail("OneCycle", detail::got("div_factor must be > 0", div_factor));
    if (!(final_div_factor > 0.0)) detail::fail("OneCycle", detail::got("final_div_factor must be > 0", final_div_factor));
  }
  double lr(double, std::int64_t s) const {
    const double initial = max_lr / div_factor;
    const double final_lr = initial / final_div_factor;
    const double peak = pct_start * static_cast<double>(total) - 1.0;  // the step at max_lr
    const double last = static_cast<double>(total - 1);
    const double step = static_cast<double>(s < total ? s : total - 1);
    if (step <= peak) return anneal(initial, max_lr, step / peak);
    return anneal(max_lr, final_lr, (step - peak) / (last - peak));
  }

 private:
  // PyTorch's _annealing_cos, term for term.
  static double anneal(double start, double end, double pct) {
    const double cos_out = std::cos(std::numbers::pi * pct) + 1.0;
    return end + (start - end) / 2.0 * cos_out;
  }
};

using Schedule = std::variant<Constant, StepDecay, CosineWarmup, OneCycle>;

inline void validate(const Schedule& schedule) {
  std::visit([](const auto& s) { s.validate(); }, schedule);
}

// The lr of the step that follows `steps` steps, for the base lr `base`.
inline double learning_rate(const Schedule& schedule, double base, std::int64_t steps) {
  return std::visit([&](const auto& s) { return s.lr(base, steps); }, schedule);
}

}  // namespace etnn::optim::schedule
