// Learning-rate schedules against torch.optim.lr_scheduler (StepLR, LinearLR + CosineAnnealingLR,
// OneCycleLR) and gradient clipping against torch.nn.utils.clip_grad_norm_, from
// optim/torch_reference.hpp (written by make_reference.py).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include <etnn/etnn.hpp>

#include "optim/torch_reference.hpp"
#include "support/flat_index.hpp"

namespace nn = etnn::nn;
namespace ref = etnn::test::torch_reference;
namespace schedule = etnn::optim::schedule;

namespace {
using Tiny = decltype(nn::input<3> >> nn::linear<2>);  // 8 parameters
static_assert(Tiny::num_params == ref::num_params);

// Value i of the reference's vector (weight, then bias, as torch concatenates them) in the model's
// flat arrays, where the bias starts aligned.
std::size_t at(int i) { return etnn::test::flat_index<etnn::Model<Tiny>>(static_cast<std::size_t>(i)); }
}  // namespace

TEST_CASE("schedules give torch.optim.lr_scheduler's learning rates, and SGD applies them") {
  for (const auto& curve : ref::schedule_curves) {
    INFO(curve.name);
    etnn::Model<Tiny, double> model(0);
    etnn::optim::SGD opt(model, {.lr = curve.base_lr});
    opt.set_schedule(curve.schedule);
    for (int s = 0; s < curve.steps; ++s) {
      INFO("step ", s + 1);
      CHECK(opt.learning_rate() == doctest::Approx(curve.lr[s]).epsilon(1e-12));
      CHECK(schedule::learning_rate(curve.schedule, curve.base_lr, s) == opt.learning_rate());
      // A unit gradient moves a weight by exactly the lr the step used.
      model.zero_grad();
      model.gradients()[0] = 1.0;
      const double before = model.parameters()[0];
      const double lr = opt.learning_rate();
      opt.step();
      CHECK(before - model.parameters()[0] == doctest::Approx(lr).epsilon(1e-12));
    }
  }
}

TEST_CASE("schedules past their total steps stay at their final learning rate") {
  const schedule::CosineWarmup cosine{.warmup = 5, .total = 20, .min_lr = 1e-3};
  CHECK(cosine.lr(0.1, 0) == doctest::Approx(0.1 / 5));
  CHECK(cosine.lr(0.1, 4) == doctest::Approx(0.1));
  CHECK(cosine.lr(0.1, 5) == doctest::Approx(0.1));
  CHECK(cosine.lr(0.1, 20) == 1e-3);
  CHECK(cosine.lr(0.1, 1000000) == 1e-3);
  const schedule::OneCycle cycle{.max_lr = 0.1, .total = 25};
  CHECK(cycle.lr(0, 24) == doctest::Approx(0.1 / 25 / 1e4).epsilon(1e-12));
  CHECK(cycle.lr(0, 25) == cycle.lr(0, 24));
  CHECK(cycle.lr(0, 1000) == cycle.lr(0, 24));
  const schedule::StepDecay decay{.step_size = 100};  // gamma 0.1
  CHECK(decay.lr(1.0, 99) == 1.0);
  CHECK(decay.lr(1.0, 100) == doctest::Approx(0.1));
  CHECK(decay.lr(1.0, 250) == doctest::Approx(0.01));
  CHECK(schedule::learning_rate(schedule::Constant{}, 0.25, 123456789) == 0.25);
}

TEST_CASE("the schedule is a function of the step count: a restored count resumes it") {
  etnn::Model<Tiny> model(0);
  etnn::optim::AdamW opt(model, {.lr = 3e-4f});
  CHECK(std::holds_alternative<schedule::Constant>(opt.schedule()));
  CHECK(opt.learning_rate() == doctest::Approx(3e-4));
  opt.set_schedule(schedule::CosineWarmup{.warmup = 10, .total = 100});
  for (int s = 0; s < 42; ++s) opt.step();
  const double at42 = opt.learning_rate();
  etnn::optim::AdamW resumed(model, {.lr = 3e-4f});
  resumed.set_schedule(schedule::CosineWarmup{.warmup = 10, .total = 100});
  resumed.restore_steps(42);
  CHECK(resumed.learning_rate() == at42);
  // set_options changes the base lr under the schedule.
  resumed.set_options({.lr = 6e-4f});
  CHECK(resumed.learning_rate() == doctest::Approx(2 * at42).epsilon(1e-6));
}

TEST_CASE("invalid schedules are refused with a clear message, keeping the previous schedule") {
  etnn::Model<Tiny> model(0);
  etnn::optim::SGD opt(model, {.lr = 0.1f});
  opt.set_schedule(schedule::StepDecay{.step_size = 10});
  CHECK_THROWS_WITH_AS(opt.set_schedule(schedule::StepDecay{}),
                       "etnn::optim::schedule::StepDecay: step_size must be >= 1, got 0", etnn::Error);
  CHECK_THROWS_WITH_AS(opt.set_schedule(schedule::StepDecay{.step_size = 1, .gamma = -1}),
                       doctest::Contains("gamma must be >= 0"), etnn::Error);
  CHECK_THROWS_WITH_AS(opt.set_schedule(schedule::CosineWarmup{.warmup = 100, .total = 100}),
                       "etnn::optim::schedule::CosineWarmup: total (100) must exceed warmup (100): set .total to the "
                       "run's optimizer steps",
                       etnn::Error);
  CHECK_THROWS_WITH_AS(opt.set_schedule(schedule::CosineWarmup{.warmup = -1, .total = 100}),
                       doctest::Contains("warmup must be >= 0"), etnn::Error);
  CHECK_THROWS_WITH_AS(opt.set_schedule(schedule::CosineWarmup{.total = 100, .min_lr = -1e-3}),
                       doctest::Contains("min_lr must be >= 0"), etnn::Error);
  CHECK_THROWS_WITH_AS(opt.set_schedule(schedule::OneCycle{.total = 100}),
                       doctest::Contains("OneCycle: max_lr must be > 0"), etnn::Error);
  CHECK_THROWS_WITH_AS(opt.set_schedule(schedule::OneCycle{.max_lr = 0.1}), doctest::Contains("total must be >= 1"),
                       etnn::Error);
  CHECK_THROWS_WITH_AS(opt.set_schedule(schedule::OneCycle{.max_lr = 0.1, .total = 100, .pct_start = 1.0}),
                       doctest::Contains("pct_start must be in (0, 1)"), etnn::Error);
  CHECK_THROWS_WITH_AS(opt.set_schedule(schedule::OneCycle{.max_lr = 0.1, .total = 3}),
                       doctest::Contains("pct_start * total must exceed 1"), etnn::Error);
  CHECK_THROWS_WITH_AS(opt.set_schedule(schedule::OneCycle{.max_lr = 0.1, .total = 100, .div_factor = 0}),
                       doctest::Contains("div_factor must be > 0"), etnn::Error);
  CHECK(std::get<schedule::StepDecay>(opt.schedule()).step_size == 10);
}

namespace {
// SGD with lr 1 from zero parameters: after one step the parameters are minus the (clipped) gradient.
template <class T>
void check_clipping(const ref::ClipCase& c, double tolerance) {
  etnn::Model<Tiny, T> model(0);
  etnn::optim::SGD opt(model, {.lr = 1.0f});
  opt.set_max_grad_norm(c.max_norm);
  CHECK(opt.max_grad_norm() == c.max_norm);
  for (int i = 0; i < ref::num_params; ++i) {
    model.parameters()[at(i)] = T(0);
    model.gradients()[at(i)] = static_cast<T>(c.gradient[i]);
  }
  opt.step();
  const bool f64 = sizeof(T) == 8;
  CHECK(opt.last_grad_norm() == doctest::Approx(f64 ? c.norm64 : c.norm32).epsilon(tolerance));
  for (int i = 0; i < ref::num_params; ++i)
    CHECK(-static_cast<double>(model.parameters()[at(i)]) ==
          doctest::Approx(f64 ? c.clipped64[i] : c.clipped32[i]).epsilon(tolerance));
}
}  // namespace

TEST_CASE("clipping by global norm matches torch.nn.utils.clip_grad_norm_") {
  for (const auto& c : ref::clip_cases) {
    INFO("max norm ", c.max_norm);
    check_clipping<double>(c, 1e-12);
    check_clipping<float>(c, 1e-6);
  }
}

TEST_CASE("clipping: off by default, infinity measures only, negative refused") {
  etnn::Model<Tiny, double> model(0);
  etnn::optim::SGD opt(model, {.lr = 1.0f});
  CHECK(opt.max_grad_norm() == 0.0f);
  CHECK(std::isnan(opt.last_grad_norm()));
  for (int i = 0; i < ref::num_params; ++i) {
    model.parameters()[at(i)] = 0;
    model.gradients()[at(i)] = ref::gradients[0][i];
  }
  opt.step();
  CHECK(std::isnan(opt.last_grad_norm()));  // not measured
  CHECK(model.parameters()[0] == -ref::gradients[0][0]);
  opt.set_max_grad_norm(std::numeric_limits<float>::infinity());
  for (int i = 0; i < ref::num_params; ++i) model.parameters()[at(i)] = 0;
  opt.step();
  CHECK(opt.last_grad_norm() == doctest::Approx(ref::clip_cases[0].norm64).epsilon(1e-12));
  for (int i = 0; i < ref::num_params; ++i) CHECK(model.parameters()[at(i)] == -ref::gradients[0][i]);
  CHECK_THROWS_WITH_AS(opt.set_max_grad_norm(-1.0f), doctest::Contains("the maximum norm must be >= 0"), etnn::Error);
  CHECK_THROWS_AS(opt.set_max_grad_norm(std::nanf("")), etnn::Error);
  CHECK(std::isinf(opt.max_grad_norm()));
}

TEST_CASE("the gradient norm over a large buffer is the sum of squares in double, over the threads' chunks") {
  // 300000 values: several threads' chunks when OpenMP is on.
  std::vector<float> g(300000);
  double expected = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    g[i] = static_cast<float>(std::sin(0.001 * static_cast<double>(i))) * 1e-3f;
    expected += static_cast<double>(g[i]) * static_cast<double>(g[i]);
  }
  const double sum = etnn::backend::sum_of_squares(etnn::Cpu{}, g.data(), g.size());
  CHECK(sum == doctest::Approx(expected).epsilon(1e-13));
  CHECK(etnn::backend::sum_of_squares(etnn::Cpu{}, g.data(), 0) == 0.0);
  CHECK(etnn::backend::sum_of_squares(etnn::Cpu{}, g.data(), 3) ==
        static_cast<double>(g[0]) * g[0] + static_cast<double>(g[1]) * g[1] + static_cast<double>(g[2]) * g[2]);
}
