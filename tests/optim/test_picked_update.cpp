// The update the device picks by the skips of the steps whose verdicts are still on their way
// (optim/picked_update.hpp), run here on the host: for every pattern of earlier skips it must be
// the update of the step number those skips give, at that step's scheduled lr, and no other
// candidate. (Within rounding, not bit for bit: the compiler may contract a candidate's
// multiply-adds differently where it is inlined into the picked update.)
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <etnn/etnn.hpp>

namespace optim = etnn::optim;
namespace schedule = etnn::optim::schedule;

namespace {

constexpr std::size_t n = 7;
constexpr std::size_t slots = 4;

// Parameters, gradients and Rule's state (slots of n values) of a small made-up model.
template <class Rule>
struct Arrays {
  std::vector<double> w, g, state;
  explicit Arrays(const typename Rule::Options& options)
      : w(n), g(n), state(Rule::state_slots(options) * n) {
    for (std::size_t i = 0; i < n; ++i) {
      w[i] = 0.3 * static_cast<double>(i) - 0.8;
      g[i] = 0.05 * static_cast<double>(i * i) - 0.4;
    }
    for (std::size_t i = 0; i < state.size(); ++i) state[i] = 0.01 * static_cast<double>(i % 5) + 0.002;
  }
};

// Rule's update for step number steps + j + 1 at lr(steps + j), as the optimizer makes candidate j.
template <class Rule>
auto candidates_of(const typename Rule::Options& options, const schedule::Schedule& s, std::int64_t steps,
                   Arrays<Rule>& a) {
  return [&options, &s, steps, &a](std::size_t j, auto&& run) {
    const std::int64_t before = steps + static_cast<std::int64_t>(j);
    Rule::template update<double>(options, schedule::learning_rate(s, options.lr, before), a.w.data(), a.g.data(),
                                  a.state.data(), n, before + 1, 1.0, run);
  };
}

// The values of two runs agree within rounding.
bool near(const std::vector<double>& a, const std::vector<double>& b) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(std::abs(a[i] - b[i]) <= 1e-14 * (1.0 + std::abs(b[i])))) return false;
  return true;
}

// Runs an update functor over every index.
struct RunAll {
  bool* ran;
  template <class Update>
  void operator()(const Update& update) const {
    for (std::size_t i = 0; i < n; ++i) update(i);
    *ran = true;
  }
};

// The picked update against the candidate the skips name, for every pattern of `pending` earlier
// skips and both of this step's own verdicts.
template <class Rule>
void check_every_pattern(const typename Rule::Options& options, const schedule::Schedule& s, std::int64_t steps,
                         std::size_t pending) {
  for (unsigned pattern = 0; pattern < (1u << pending); ++pattern) {
    for (const unsigned long long own : {0ull, 1ull}) {
      std::array<unsigned long long, slots> skips{};
      std::array<const unsigned long long*, slots> earlier{};
      std::size_t applied = 0;
      for (std::size_t k = 0; k < pending; ++k) {
        skips[k] = ((pattern >> k) & 1u) != 0 ? 7ull : 0ull;  // any non-zero word skips
        earlier[k] = &skips[k];
        applied += skips[k] == 0;
      }
      CAPTURE(steps);
      CAPTURE(pending);
      CAPTURE(pattern);
      CAPTURE(own);
      Arrays<Rule> picked(options);
      bool ran = false;
      REQUIRE(optim::launch_picked_update<slots>(&own, std::span(earlier.data(), pending),
                                                 candidates_of<Rule>(options, s, steps, picked), RunAll{&ran}));
      CHECK(ran);
      if (own != 0) {  // skipped: nothing moves
        CHECK(picked.w == Arrays<Rule>(options).w);
        CHECK(picked.state == Arrays<Rule>(options).state);
        continue;
      }
      for (std::size_t j = 0; j <= pending; ++j) {
        Arrays<Rule> candidate(options);
        bool done = false;
        candidates_of<Rule>(options, s, steps, candidate)(j, RunAll{&done});
        REQUIRE(done);
        CAPTURE(j);
        CHECK(near(picked.w, candidate.w) == (j == applied));
        CHECK(near(picked.state, candidate.state));  // moments and velocity: the same at every step number
      }
    }
  }
}

}  // namespace

TEST_CASE("the picked update is the update of the step number the earlier verdicts' skips give, and no other") {
  const schedule::Schedule halving = schedule::StepDecay{.step_size = 1, .gamma = 0.5};  // a new lr every step
  SUBCASE("Adam: bias corrections and lr by step") {
    const optim::AdamOptions options{.lr = 0.01f, .weight_decay = 0.1f};
    for (const std::size_t pending : {0u, 1u, 2u, 3u})
      for (const std::int64_t steps : {0, 5}) check_every_pattern<optim::rules::Adam>(options, halving, steps, pending);
  }
  SUBCASE("AdamW with amsgrad: the decoupled decay follows the picked lr") {
    const optim::AdamWOptions options{.lr = 0.02f, .weight_decay = 0.3f, .amsgrad = true};
    for (const std::size_t pending : {1u, 3u}) check_every_pattern<optim::rules::AdamW>(options, halving, 2, pending);
  }
  SUBCASE("SGD with momentum past its first step") {
    const optim::SgdOptions options{.lr = 0.1f, .momentum = 0.9f, .nesterov = true};
    for (const std::size_t pending : {0u, 2u, 3u}) check_every_pattern<optim::rules::Sgd>(options, halving, 1, pending);
  }
}

TEST_CASE("candidates of different types are refused, launching nothing") {
  // SGD's first step with momentum copies the gradient into the velocity: a type of its own.
  using Rule = optim::rules::Sgd;
  const optim::SgdOptions options{.lr = 0.1f, .momentum = 0.9f};
  const schedule::Schedule constant = schedule::Constant{};
  Arrays<Rule> a(options);
  const std::vector<double> before = a.w;
  const unsigned long long own = 0, first = 1;
  const std::array<const unsigned long long*, 1> earlier{&first};
  bool ran = false;
  CHECK_FALSE(optim::launch_picked_update<slots>(&own, std::span(earlier), candidates_of<Rule>(options, constant, 0, a),
                                                 RunAll{&ran}));
  CHECK_FALSE(ran);
  CHECK(a.w == before);
  // With no verdict on its way there is one candidate.
  CHECK(optim::launch_picked_update<slots>(&own, {}, candidates_of<Rule>(options, constant, 0, a), RunAll{&ran}));
  CHECK(ran);
  CHECK(a.w != before);
}

TEST_CASE("more verdicts on their way than the slots hold is an error, not a wrong pick") {
  using Rule = optim::rules::Adam;
  const optim::AdamOptions options{};
  const schedule::Schedule constant = schedule::Constant{};
  Arrays<Rule> a(options);
  const unsigned long long word = 0;
  const std::array<const unsigned long long*, slots> earlier{&word, &word, &word, &word};
  bool ran = false;
  CHECK_THROWS_WITH_AS(optim::launch_picked_update<slots>(&word, std::span(earlier),
                                                          candidates_of<Rule>(options, constant, 0, a), RunAll{&ran}),
                       doctest::Contains("4 verdicts on their way, past the 3"), etnn::Error);
  CHECK_FALSE(ran);
}
