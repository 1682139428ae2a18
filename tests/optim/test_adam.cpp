// Adam and AdamW against torch.optim.Adam / AdamW: the trajectories of optim/torch_reference.hpp
// (written by make_reference.py) for every option, with gradient clipping and schedules, in float64
// and float32, in one process and with a stand-in for two ranks.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include <etnn/etnn.hpp>

#include "optim/torch_reference.hpp"
#include "support/flat_index.hpp"

namespace nn = etnn::nn;
namespace ref = etnn::test::torch_reference;

namespace {

using Tiny = decltype(nn::input<3> >> nn::linear<2>);  // 8 parameters, the reference's flat vector
static_assert(Tiny::num_params == ref::num_params);

// Value i of the reference's vector (weight, then bias, as torch concatenates them) in the model's
// flat arrays, where the bias starts aligned.
std::size_t at(int i) { return etnn::test::flat_index<etnn::Model<Tiny>>(static_cast<std::size_t>(i)); }

// Two ranks holding the same gradients: every allreduce doubles the data, so the mean gradient is
// the single process's, and so must be the whole trajectory.
struct Mirror {
  struct Pending {};
  int rank() const noexcept { return 0; }
  int size() const noexcept { return 2; }
  template <class T>
  void broadcast(T*, std::size_t, int) noexcept {}
  template <class T>
  Pending start_allreduce_sum(T* data, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) data[i] += data[i];
    return {};
  }
  bool poll(Pending&) noexcept { return true; }
  void wait(Pending&) noexcept {}
  void abort(const char*) noexcept {}
};

// Runs a reference case with etnn's Adam (or AdamW) over reducer R; returns the parameters after
// every step and the gradient norms the optimizer reports.
template <class T, class R>
std::vector<std::vector<T>> follow(const ref::AdamRun& run, R& reducer, std::vector<double>& norms) {
  etnn::Model<Tiny, T> model(0);
  for (int i = 0; i < ref::num_params; ++i) model.parameters()[at(i)] = static_cast<T>(ref::initial[i]);
  auto trajectory = [&](auto& opt) {
    opt.set_schedule(run.schedule);
    opt.set_max_grad_norm(run.max_grad_norm);
    std::vector<std::vector<T>> params;
    for (int s = 0; s < ref::steps; ++s) {
      for (int i = 0; i < ref::num_params; ++i) model.gradients()[at(i)] = static_cast<T>(ref::gradients[s][i]);
      opt.step();
      params.emplace_back();
      for (int i = 0; i < ref::num_params; ++i) params.back().push_back(model.parameters()[at(i)]);
      norms.push_back(opt.last_grad_norm());
    }
    return params;
  };
  if (run.decoupled) {
    etnn::optim::AdamW opt(model, {.lr = run.lr, .beta1 = run.beta1, .beta2 = run.beta2, .eps = run.eps,
                                   .weight_decay = run.weight_decay, .amsgrad = run.amsgrad}, reducer);
    return trajectory(opt);
  }
  etnn::optim::Adam opt(model, {.lr = run.lr, .beta1 = run.beta1, .beta2 = run.beta2, .eps = run.eps,
                                .weight_decay = run.weight_decay, .amsgrad = run.amsgrad}, reducer);
  return trajectory(opt);
}

template <class T>
void check_against_torch(double tolerance) {
  for (const auto& run : ref::adam_runs) {
    INFO(run.name, (sizeof(T) == 8 ? " in double" : " in float"));
    etnn::dist::Local local;
    std::vector<double> norms;
    const auto params = follow<T>(run, local, norms);
    for (int s = 0; s < ref::steps; ++s) {
      INFO("step ", s + 1);
      const double* expected = sizeof(T) == 8 ? run.f64[s] : run.f32[s];
      for (int i = 0; i < ref::num_params; ++i)
        CHECK(static_cast<double>(params[s][i]) == doctest::Approx(expected[i]).epsilon(tolerance));
      if (run.max_grad_norm > 0)
        CHECK(norms[s] == doctest::Approx(run.norm[s]).epsilon(tolerance));
      else
        CHECK(std::isnan(norms[s]));
    }
    // The same run on two ranks with equal gradients: bitwise the same parameters and norms.
    Mirror two;
    std::vector<double> two_norms;
    const auto two_params = follow<T>(run, two, two_norms);
    for (int s = 0; s < ref::steps; ++s)
      CHECK(std::memcmp(params[s].data(), two_params[s].data(), sizeof(T) * ref::num_params) == 0);
    CHECK(std::memcmp(norms.data(), two_norms.data(), sizeof(double) * norms.size()) == 0);
  }
}

}  // namespace

TEST_CASE("Adam and AdamW follow torch.optim.Adam and AdamW in double") { check_against_torch<double>(1e-13); }

TEST_CASE("Adam and AdamW follow torch.optim.Adam and AdamW in float") { check_against_torch<float>(2e-6); }

TEST_CASE("Adam and AdamW: PyTorch's defaults, state names and deduction") {
  static_assert(etnn::optim::AdamOptions{}.weight_decay == 0.0f);
  static_assert(etnn::optim::AdamWOptions{}.weight_decay == 0.01f);
  static_assert(etnn::optim::AdamOptions{}.lr == 1e-3f && etnn::optim::AdamOptions{}.eps == 1e-8f);
  static_assert(etnn::optim::AdamOptions{}.beta1 == 0.9f && etnn::optim::AdamOptions{}.beta2 == 0.999f);
  static_assert(!etnn::optim::AdamWOptions{}.amsgrad);

  etnn::Model<Tiny> model(0);
  etnn::optim::Adam adam(model, {});
  etnn::optim::AdamW adamw(model, {.amsgrad = true});
  static_assert(std::is_same_v<decltype(adam), etnn::optim::Adam<etnn::Model<Tiny>, etnn::dist::Local>>);
  static_assert(std::is_same_v<decltype(adamw), etnn::optim::AdamW<etnn::Model<Tiny>, etnn::dist::Local>>);
  Mirror two;
  etnn::optim::AdamW parallel(model, {.lr = 1e-2f}, two, {.bucket_bytes = 16});
  static_assert(std::is_same_v<decltype(parallel), etnn::optim::AdamW<etnn::Model<Tiny>, Mirror>>);

  using Names = std::vector<std::string>;
  CHECK(etnn::optim::rules::Adam::state_names(adam.options()) == Names{"exp_avg", "exp_avg_sq"});
  CHECK(etnn::optim::rules::AdamW::state_names(adamw.options()) ==
        Names{"exp_avg", "exp_avg_sq", "max_exp_avg_sq"});
  CHECK(adam.state_size() == 2 * Tiny::flat_size);
  CHECK(adamw.state_size() == 3 * Tiny::flat_size);
}

TEST_CASE("Adam and AdamW reject invalid options with a clear message") {
  etnn::Model<Tiny> model(0);
  using A = etnn::optim::AdamOptions;
  using W = etnn::optim::AdamWOptions;
  CHECK_THROWS_WITH_AS(etnn::optim::Adam(model, A{.lr = -1.0f}), "etnn::optim::Adam: lr must be >= 0, got -1.000000",
                       etnn::Error);
  CHECK_THROWS_WITH_AS(etnn::optim::Adam(model, A{.beta1 = 1.0f}), doctest::Contains("beta1 must be in [0, 1)"),
                       etnn::Error);
  CHECK_THROWS_WITH_AS(etnn::optim::AdamW(model, W{.beta2 = -0.5f}),
                       doctest::Contains("etnn::optim::AdamW: beta2 must be in [0, 1)"), etnn::Error);
  CHECK_THROWS_WITH_AS(etnn::optim::AdamW(model, W{.eps = std::nanf("")}), doctest::Contains("eps must be >= 0"),
                       etnn::Error);
  CHECK_THROWS_WITH_AS(etnn::optim::AdamW(model, W{.weight_decay = -0.1f}),
                       doctest::Contains("weight_decay must be >= 0"), etnn::Error);

  etnn::optim::Adam opt(model, {});
  opt.set_options({.lr = 1e-2f, .weight_decay = 1e-4f});
  CHECK(opt.options().lr == 1e-2f);
  CHECK_THROWS_WITH_AS(opt.set_options({.amsgrad = true}), doctest::Contains("build a new optimizer"), etnn::Error);
  CHECK(!opt.options().amsgrad);
}
