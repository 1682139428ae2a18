#pragma once
// Private to data/: include <etnn/data/data.hpp> or <etnn/etnn.hpp>.
// Samplers: which samples an epoch visits, and in which order.
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "../core/error.hpp"
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

struct DistributedSamplerOptions {
  bool shuffle = true;     // a permutation seeded by (seed, epoch), the same on every rank
  std::uint64_t seed = 0;
  bool drop_last = false;  // drop the tail that does not divide evenly, instead of padding
};

// Each rank's share of the data for data-parallel training, with the semantics of PyTorch's
// torch.utils.data.DistributedSampler:
//   num_samples = ceil(n / R), or ceil((n - R) / R) with drop_last when R does not divide n
//   the epoch's order (0..n-1 or a permutation), padded by repeating it from its start up to
//   num_samples * R (or cut to that length with drop_last); rank r takes positions r, r + R, ...
// so the ranks' shares are disjoint except for the padding, and cover the data.
class DistributedSampler {
 public:
  // world: anything with rank() and size(), e.g. etnn::dist::Mpi.
  template <class World>
    requires requires(const World& w) { w.rank(); w.size(); }
  explicit DistributedSampler(const World& world, DistributedSamplerOptions options = {})
      : DistributedSampler(world.rank(), world.size(), options) {}

  DistributedSampler(int rank, int num_ranks, DistributedSamplerOptions options = {})
      : rank_(rank), ranks_(num_ranks), options_(options) {
    if (num_ranks < 1 || rank < 0 || rank >= num_ranks)
      throw Error("etnn::data::DistributedSampler: rank " + std::to_string(rank) + " of " + std::to_string(num_ranks) +
                  " ranks; need 0 <= rank < num_ranks");
  }

  int rank() const noexcept { return rank_; }
  int num_ranks() const noexcept { return ranks_; }

  std::size_t num_samples(std::size_t n) const noexcept {
    const auto r = static_cast<std::size_t>(ranks_);
    if (options_.drop_last && n % r != 0) return n < r ? 0 : (n - r + r - 1) / r;
    return (n + r - 1) / r;
  }

  void fill(std::size_t n, int epoch, std::span<std::size_t> order) const {
    if (n == 0) return;
    epoch_order_.resize(n);  // grows once; reused every epoch
    if (options_.shuffle) {
      RandomSampler{options_.seed}.fill(n, epoch, epoch_order_);
    } else {
      SequentialSampler{}.fill(n, epoch, epoch_order_);
    }
    for (std::size_t i = 0; i < order.size(); ++i)
      order[i] = epoch_order_[(static_cast<std::size_t>(rank_) + i * static_cast<std::size_t>(ranks_)) % n];
  }

 private:
  int rank_;
  int ranks_;
  DistributedSamplerOptions options_;
  mutable std::vector<std::size_t> epoch_order_;  // the whole epoch's order, before taking this rank's share
};

// The samplers a DataLoader can hold.
using Sampler = std::variant<SequentialSampler, RandomSampler, DistributedSampler>;

}  // namespace etnn::data
