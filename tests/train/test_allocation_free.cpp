// After Trainer::reserve (or the first step at the largest batch size), Trainer::step allocates
// nothing, and neither does Model::forward into a caller's tensor after Model::reserve: every
// operator new and every call into the C allocator (Eigen, OpenMP, the C library) is counted.
#include <doctest/doctest.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <new>
#include <vector>

#include <etnn/etnn.hpp>

#include "char_lm_model.hpp"

namespace {
std::atomic<long> news{0};     // operator new
std::atomic<long> mallocs{0};  // the C allocator, including what operator new forwards to it
}

// glibc's allocator entry points under their internal names; interposing the public ones counts
// allocations made by Eigen, OpenMP and the C library as well as by operator new.
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void* malloc(std::size_t n) {
  ++mallocs;
  return __libc_malloc(n);
}
void* calloc(std::size_t n, std::size_t size) {
  ++mallocs;
  return __libc_calloc(n, size);
}
void* realloc(void* p, std::size_t n) {
  ++mallocs;
  return __libc_realloc(p, n);
}
void* aligned_alloc(std::size_t alignment, std::size_t n) {
  ++mallocs;
  return __libc_memalign(alignment, n);
}
int posix_memalign(void** out, std::size_t alignment, std::size_t n) {
  ++mallocs;
  *out = __libc_memalign(alignment, n);
  return *out == nullptr ? ENOMEM : 0;
}
}

void* operator new(std::size_t n) {
  ++news;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  ++news;
  if (void* p = std::aligned_alloc(static_cast<std::size_t>(a), (n + static_cast<std::size_t>(a) - 1) / static_cast<std::size_t>(a) * static_cast<std::size_t>(a))) return p;
  throw std::bad_alloc();
}
// Not inlined, so that GCC does not pair free() with the caller's operator new (-Wmismatched-new-delete).
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace nn = etnn::nn;

namespace {
using Net = decltype(nn::input<784> >> nn::linear<512> >> nn::relu >> nn::linear<256> >> nn::gelu >> nn::linear<10>);

struct Allocations {
  long news_before = news.load();
  long mallocs_before = mallocs.load();
  long operator_new() const { return news.load() - news_before; }
  long c_allocator() const { return mallocs.load() - mallocs_before; }
};

etnn::Tensor<float, etnn::Shape<784>> inputs(int batch) {
  etnn::Tensor<float, etnn::Shape<784>> x(batch);
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(i % 255) / 255.0f;
  return x;
}
}  // namespace

TEST_CASE("Trainer::step allocates nothing after reserve(), from the first step on") {
  etnn::Model<Net> model(0);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.01f, .momentum = 0.9f});
  etnn::Trainer trainer(model, loss, opt);
  const auto x = inputs(64);
  std::vector<int> y(64);
  for (int i = 0; i < 64; ++i) y[static_cast<std::size_t>(i)] = i % 10;
  trainer.reserve(64);
  for (std::size_t i = 0; i < Net::flat_size; ++i) REQUIRE(model.gradients()[i] == 0.0f);  // reserve adds zero

  const Allocations steps;
  for (int i = 0; i < 20; ++i) trainer.step(x, y);
  CHECK(steps.operator_new() == 0);
  CHECK(steps.c_allocator() == 0);
  // A smaller batch fits the workspace and the packing buffers too.
  const Allocations smaller;
  trainer.step(x.view().first(17), std::span<const int>(y).subspan(0, 17));
  CHECK(smaller.operator_new() == 0);
  CHECK(smaller.c_allocator() == 0);
}

TEST_CASE("a double model on float data allocates nothing per step either (staging buffers are reserved)") {
  etnn::Model<Net, double> model(0);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.01f});
  etnn::Trainer trainer(model, loss, opt);
  const auto x = inputs(32);
  const std::vector<int> y(32, 3);
  trainer.reserve(32);
  const Allocations steps;
  for (int i = 0; i < 5; ++i) trainer.step(x, y);
  CHECK(steps.operator_new() == 0);
  CHECK(steps.c_allocator() == 0);
}

TEST_CASE("Model::forward into a caller's tensor allocates nothing after reserve()") {
  etnn::Model<Net> model(0);
  const auto x = inputs(48);
  etnn::Tensor<float, etnn::Shape<10>> out(48);
  model.reserve(48);
  const Allocations calls;
  for (int i = 0; i < 10; ++i) model.forward(x, out.view());
  CHECK(calls.operator_new() == 0);
  CHECK(calls.c_allocator() == 0);
}

TEST_CASE("the layers of a CNN (conv, batch norm, pooling, residual, dropout, concat) with Adam allocate nothing") {
  using Cnn = decltype(nn::input<1, 28, 28> >> nn::conv2d<6, 5, nn::pad<2>> >> nn::batch_norm >> nn::relu >>
                       nn::max_pool2d<2> >> nn::residual(nn::conv2d<6, 3, nn::pad<1>> >> nn::relu) >>
                       nn::avg_pool2d<2> >> nn::flatten >> nn::dropout >>
                       nn::concat(nn::linear<16> >> nn::layer_norm, nn::linear<8>) >> nn::log_softmax >>
                       nn::linear<10>);
  etnn::Model<Cnn> model(0);
  etnn::loss::CrossEntropy loss;
  etnn::optim::Adam opt(model, {.lr = 1e-3f});
  opt.set_schedule(etnn::optim::schedule::CosineWarmup{.warmup = 5, .total = 100});
  opt.set_max_grad_norm(1.0f);
  etnn::Trainer trainer(model, loss, opt);
  etnn::Tensor<float, etnn::Shape<1, 28, 28>> x(32);
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(i % 255) / 255.0f;
  std::vector<int> y(32);
  for (int i = 0; i < 32; ++i) y[static_cast<std::size_t>(i)] = i % 10;
  trainer.reserve(32);
  model.reserve(32);
  etnn::Tensor<float, etnn::Shape<10>> out(32);
  const Allocations steps;
  for (int i = 0; i < 5; ++i) trainer.step(x, y);
  model.eval();
  model.forward(x, out.view());
  CHECK(steps.operator_new() == 0);
  CHECK(steps.c_allocator() == 0);
}

TEST_CASE("examples/char_lm's step (its GPT, AdamW, cosine schedule, clipping) allocates nothing, nor does inference") {
  using char_lm::context, char_lm::vocabulary;
  etnn::Model<char_lm::Gpt> model(0);
  etnn::loss::SequenceCrossEntropy loss;
  etnn::optim::AdamW opt(model, char_lm::optimizer_options(2e-3f));
  char_lm::set_schedule(opt, 100);
  etnn::Trainer trainer(model, loss, opt);
  constexpr int batch = 4;
  etnn::Tensor<float, char_lm::Tokens> x(batch);
  std::vector<int> y(batch * context);
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(i * 7 % vocabulary);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int>((i * 7 + 7) % vocabulary);
  trainer.reserve(batch);
  model.reserve(batch);
  etnn::Tensor<float, etnn::Shape<context, vocabulary>> out(batch);
  const Allocations steps;
  for (int i = 0; i < 3; ++i) trainer.step(x, y);
  model.eval();
  model.forward(x, out.view());
  CHECK(steps.operator_new() == 0);
  CHECK(steps.c_allocator() == 0);
}
