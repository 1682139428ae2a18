// examples/char_lm's training steps (its GPT, AdamW with its schedule and clipping, through the
// Trainer) end in the same bits on any number of CPU threads: the losses and every parameter.
// ctest runs this again with ETNN_CPU_GEMM=eigen (train.char_lm_eigen_gemm), on Eigen's products.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <etnn/etnn.hpp>

#include "char_lm_model.hpp"
#include "support/thread_count.hpp"

namespace {

struct Trained {
  std::vector<float> losses;
  std::vector<float> parameters;
};

// Three steps on batches of 5 windows of ids (the same on every call), on `threads` threads.
Trained train_on(int threads) {
  using char_lm::context, char_lm::vocabulary;
  etnn::test::ThreadCount pool(threads);
  etnn::Model<char_lm::Gpt> model(3);
  etnn::loss::SequenceCrossEntropy loss;
  etnn::optim::AdamW opt(model, char_lm::optimizer_options(2e-3f));
  char_lm::set_schedule(opt, 30);
  etnn::Trainer trainer(model, loss, opt);
  constexpr int batch = 5;
  etnn::Tensor<float, char_lm::Tokens> x(batch);
  std::vector<int> y(batch * context);
  Trained out;
  for (int step = 0; step < 3; ++step) {
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>((i * 31 + 17 * step) % vocabulary);
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int>((i * 31 + 17 * step + 31) % vocabulary);
    out.losses.push_back(trainer.step(x, y));
  }
  out.parameters.assign(model.parameters(), model.parameters() + char_lm::Gpt::flat_size);
  return out;
}

}  // namespace

TEST_CASE("examples/char_lm's training steps are bitwise the same on 1, 2 and 3 threads") {
  MESSAGE("float GEMM engine: ", std::string(etnn::cpu::gemm_engine_name(etnn::cpu::float_gemm_engine())));
  const Trained one = train_on(1);
  REQUIRE(one.losses.size() == 3);
  for (const float l : one.losses) CHECK(std::isfinite(l));
  for (const int threads : {2, 3}) {
    const Trained other = train_on(threads);
    CAPTURE(threads);
    CHECK(std::memcmp(one.losses.data(), other.losses.data(), one.losses.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(one.parameters.data(), other.parameters.data(), one.parameters.size() * sizeof(float)) == 0);
  }
}
