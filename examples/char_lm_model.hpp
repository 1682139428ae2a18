#pragma once
// examples/char_lm's character-level GPT and how it trains, defined once for the example, its
// benchmark (benchmarks/bench_train.cpp: gpt) and the tests of its training step
// (tests/train/test_char_lm_step.cpp, tests/train/test_allocation_free.cpp):
//   128 byte ids -> embedding (128 x 128) + learned positions -> 4 causal transformer blocks
//   (4 heads, MLP 128 -> 512 -> 128 with GELU) -> layer_norm -> logits over the 128 ids, per position;
//   AdamW (weight decay 0.01), cosine decay after a 20-step warm-up, gradients clipped to norm 1.
#include <etnn/etnn.hpp>

#include <cstdint>

namespace char_lm {

namespace nn = etnn::nn;

constexpr int context = 128;     // T: characters per sample
constexpr int vocabulary = 128;  // V: token ids (distinct bytes of the corpus, densely numbered)
constexpr int width = 128;       // D
constexpr int heads = 4;
constexpr int blocks = 4;        // the blocks of `gpt` below

constexpr auto block = nn::residual(nn::layer_norm >> nn::multi_head_attention<heads, true>) >>
                       nn::residual(nn::layer_norm >> nn::linear<4 * width> >> nn::gelu >> nn::linear<width>);
constexpr auto gpt = nn::input_tokens<context, vocabulary> >> nn::embedding<width> >> nn::positional_embedding >>
                     block >> block >> block >> block >> nn::layer_norm >> nn::linear<vocabulary>;
using Gpt = decltype(gpt);
using Tokens = etnn::Tokens<context, vocabulary>;

// The example's optimizer at learning rate `lr`: AdamW with weight decay 0.01,
//   etnn::optim::AdamW adamw(model, char_lm::optimizer_options(lr));
//   char_lm::set_schedule(adamw, total_steps);
// then a cosine schedule over `total_steps` (when there are more than its warm-up) and gradients
// clipped to norm 1.
inline etnn::optim::AdamWOptions optimizer_options(float lr) { return {.lr = lr, .weight_decay = 0.01f}; }

template <class Optimizer>
void set_schedule(Optimizer& adamw, std::int64_t total_steps) {
  constexpr std::int64_t warmup = 20;
  if (total_steps > warmup) adamw.set_schedule(etnn::optim::schedule::CosineWarmup{.warmup = warmup, .total = total_steps});
  adamw.set_max_grad_norm(1.0f);
}

}  // namespace char_lm
