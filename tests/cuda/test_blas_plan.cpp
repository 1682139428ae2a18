// What a cuBLASLt plan is chosen for (cuda/blas_plan.hpp), on the host: each operand's alignment
// from its address and leading dimension, a key that tells plans for different alignments apart,
// and a plan map that makes each plan once and never runs two plans' launches at once.
#include <doctest/doctest.h>

#include <etnn/cuda/blas_plan.hpp>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

using etnn::cuda::Epilogue;
using etnn::cuda::detail::alignment_of;
using etnn::cuda::detail::matrix_alignment;
using etnn::cuda::detail::PlanCache;
using etnn::cuda::detail::PlanKey;

namespace {
constexpr std::uintptr_t base = 0x7f0000000000;  // as a device allocation: 256-byte aligned (and more)
constexpr std::size_t f32 = 4, bf16 = 2;
}  // namespace

TEST_CASE("blas alignment: the largest power of two dividing the address, at most 256") {
  static_assert(alignment_of(base) == 256);
  CHECK(alignment_of(0) == 256);
  CHECK(alignment_of(base + 4) == 4);
  CHECK(alignment_of(base + 8) == 8);
  CHECK(alignment_of(base + 16) == 16);
  CHECK(alignment_of(base + 2) == 2);
  CHECK(alignment_of(base + 1) == 1);
  CHECK(alignment_of(base + 512) == 256);
  CHECK(alignment_of(base + 624) == 16);  // LeNet's second weight: 6 * 1 * 5 * 5 + 6 = 156 floats in
  CHECK(alignment_of(base + 148) == 4);
}

TEST_CASE("blas alignment of a matrix: its address and every column's, ld * element bytes apart") {
  CHECK(matrix_alignment(base, 64, f32) == 256);
  CHECK(matrix_alignment(base, 784, f32) == 64);       // 3136-byte columns
  CHECK(matrix_alignment(base, 37, f32) == 4);         // batch 37: 148-byte strides
  CHECK(matrix_alignment(base + 148, 64, f32) == 4);   // the second row of a batch-37 block
  CHECK(matrix_alignment(base + 624, 150, f32) == 8);  // LeNet's conv2 weight (16 x 150): 600-byte columns
  CHECK(matrix_alignment(base + 16, 64, f32) == 16);
  CHECK(matrix_alignment(base + 8, 64, f32) == 8);
  CHECK(matrix_alignment(base + 4, 64, f32) == 4);
  CHECK(matrix_alignment(base, 10, f32) == 8);         // 40-byte columns
  CHECK(matrix_alignment(base, 10, bf16) == 4);        // 20-byte columns of a 16-bit copy
  CHECK(matrix_alignment(base + 2, 64, bf16) == 2);
  // Packed parameters of input<784> >> linear<10> >> linear<10>: the bias right after the first
  // weight (7840 floats), the second weight after that bias.
  CHECK(alignment_of(base + 7840 * f32) == 128);
  CHECK(matrix_alignment(base + (7840 + 10) * f32, 10, f32) == 8);
  // From a pointer: the same numbers.
  alignas(256) static float values[128];
  CHECK(matrix_alignment(values, 64) == 256);
  CHECK(matrix_alignment(values + 1, 64) == 4);
  CHECK(matrix_alignment(values + 4, 64) == 16);
  CHECK(matrix_alignment(values, 37) == 4);
}

namespace {
PlanKey key_with(unsigned align_a, unsigned align_b, unsigned align_c) {
  return {true, false, 64, 37, 784, 784, 784, 64, Epilogue::bias, 0, 0, true, align_a, align_b, align_c};
}
}  // namespace

TEST_CASE("blas plan key: the same product with other alignments is another plan") {
  const PlanKey aligned = key_with(256, 256, 256);
  CHECK(aligned == key_with(256, 256, 256));
  CHECK(aligned != key_with(4, 256, 256));
  CHECK(aligned != key_with(256, 4, 256));
  CHECK(aligned != key_with(256, 256, 4));
  CHECK(key_with(16, 256, 256) != key_with(4, 256, 256));

  int made = 0;
  PlanCache<unsigned> plans;
  std::vector<unsigned> used;
  const auto use = [&](const PlanKey& key) {
    plans.use(
        key, [&](const PlanKey& k) { ++made; return k.align_a; }, [&](unsigned& plan) { used.push_back(plan); });
  };
  use(aligned);
  use(key_with(4, 256, 256));
  use(aligned);
  use(key_with(4, 256, 256));
  CHECK(made == 2);
  CHECK(plans.size() == 2);
  // Each call ran the plan made for its own alignment, never the other's.
  CHECK(used == std::vector<unsigned>{256, 4, 256, 4});
}

TEST_CASE("blas plan cache: from many threads, each plan is made once and no two runs overlap") {
  PlanCache<int> plans;
  std::atomic<int> made{0}, running{0}, most_running{0}, runs{0};
  constexpr int threads = 8, calls = 2000;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      for (int i = 0; i < calls; ++i) {
        // Four keys, each reached by every thread: alignments 4, 8, 16, 32 for A.
        const PlanKey key = key_with(4u << ((i + t) % 4), 256, 256);
        plans.use(
            key, [&](const PlanKey&) { return ++made; },
            [&](int&) {
              const int now = ++running;
              int seen = most_running.load();
              while (now > seen && !most_running.compare_exchange_weak(seen, now)) {
              }
              ++runs;
              --running;
            });
      }
    });
  for (auto& w : workers) w.join();
  CHECK(made == 4);
  CHECK(plans.size() == 4);
  CHECK(runs == threads * calls);
  CHECK(most_running == 1);
}
