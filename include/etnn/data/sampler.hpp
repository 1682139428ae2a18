#pragma once
// Samplers: which samples an epoch visits, and in which order.
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <utility>
#include <variant>

#include "../core/random.hpp"

namespace etnn::data {

// A sampler decides which of the n samples an epoch visits, and in which order:
//   num_samples(n)             how many indices an epoch yields
//   fill(n, epoch, order)      writes them, order.size() == num_samples(n)

// 0, 1, ..., n - 1 every epoch.
struct SequentialSampler {
  std::size_t num_samples(std::size_t n) const noexcept { return n; }
  void fill(std::size_t, int, std::span<std::size_t> order) const noexcept {
    std::iota(order.begin(), order.end(), std::size_t{0});
  }
};

// A permutation of 0..n-1 that depends only on (seed, epoch): Fisher-Yates driven by etnn::Rng.
struct RandomSampler {
  std::uint64_t seed = 0;

  std::size_t num_samples(std::size_t n) const noexcept { return n; }
  void fill(std::size_t, int epoch, std::span<std::size_t> order) const noexcept {
    std::iota(order.begin(), order.end(), std::size_t{0});
    Rng rng(derive_seed(seed, static_cast<std::uint64_t>(epoch)));
    for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  }
};

// The samplers a DataLoader can hold.
using Sampler = std::variant<SequentialSampler, RandomSampler>;

}  // namespace etnn::data
