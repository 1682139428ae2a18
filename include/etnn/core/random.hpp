#pragma once
// Private to core/: include <etnn/core/core.hpp> or <etnn/etnn.hpp>.
// Seeded random numbers that give the same sequence on every platform and standard library
// (std::uniform_*_distribution do not). Used for initialisation, shuffling and dropout.
#include <cmath>
#include <cstdint>

#include "config.hpp"

namespace etnn {

// SplitMix64: turns any 64-bit seed (including 0) into well-mixed state words.
ETNN_HD constexpr std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A seed derived from a parent seed and a stream number, so that independent streams
// (one per parameter tensor, one per epoch) do not depend on how many numbers others drew.
constexpr std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream) {
  std::uint64_t s = seed ^ (stream * 0xD1B54A32D192ED03ull);
  return splitmix64(s);
}

// A uniform in [0, 1) that is a pure function of a seed and an index (53 random bits): what a
// dropout mask draws, so that backward recomputes the mask, and any thread or device draws the
// same value for the same element.
ETNN_HD constexpr double counter_uniform(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t state = seed + index * 0xD1B54A32D192ED03ull;
  return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
}

// xoshiro256**: fast, 256-bit state, passes BigCrush.
class Rng {
  __extension__ using Wide = unsigned __int128;  // 64x64 -> 128-bit product

 public:
  explicit constexpr Rng(std::uint64_t seed = 0) {
    for (auto& word : s_) word = splitmix64(seed);
  }

  constexpr std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  constexpr double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi).
  constexpr double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

  // Standard normal (Box-Muller over two uniforms): torch.nn.init.normal_'s distribution, not its
  // stream.
  double normal() {
    const double u = 1.0 - uniform();  // in (0, 1]: the logarithm is finite
    const double v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586476925 * v);
  }

  // Uniform integer in [0, bound), unbiased (Lemire's multiply-and-reject).
  constexpr std::uint64_t below(std::uint64_t bound) {
    Wide m = static_cast<Wide>(next()) * bound;
    auto low = static_cast<std::uint64_t>(m);
    if (low < bound) {
      const std::uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        m = static_cast<Wide>(next()) * bound;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4]{};
};

}  // namespace etnn
