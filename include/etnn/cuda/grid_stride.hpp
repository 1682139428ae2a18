#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// The grid-stride loop every elementwise and index kernel runs, and the grid its launches get.
// Thread t of a grid of T threads (t = blockIdx.x blockDim.x + threadIdx.x, T = gridDim.x
// blockDim.x) visits
//   i = begin + t, begin + t + T, begin + t + 2T, ...  while i < end
// so the T threads together visit every i in [begin, end) exactly once, whatever T is: a grid
// smaller than the items (grid_blocks caps it) costs time, never items. In a kernel
//   for (const std::size_t i : grid_stride(n)) y[i] = f(x[i]);     (cuda/runtime.hpp)
// This header needs no CUDA: the host tests run the same index math with an emulated grid.
#include <cstddef>

#include "../core/config.hpp"

namespace etnn::cuda {

// The indices one thread of a grid-stride loop visits, as a range: first, first + stride, ... < end.
class GridStride {
 public:
  struct End {};
  class Iterator {
   public:
    ETNN_HD constexpr Iterator(std::size_t i, std::size_t stride, std::size_t end) : i_(i), stride_(stride), end_(end) {}
    ETNN_HD constexpr std::size_t operator*() const { return i_; }
    ETNN_HD constexpr Iterator& operator++() {
      i_ += stride_;
      return *this;
    }
    ETNN_HD constexpr bool operator!=(End) const { return i_ < end_; }

   private:
    std::size_t i_, stride_, end_;
  };

  // Thread `thread` of `threads` over [begin, end).
  ETNN_HD constexpr GridStride(std::size_t thread, std::size_t threads, std::size_t begin, std::size_t end)
      : first_(begin + thread), stride_(threads), end_(end) {}

  ETNN_HD constexpr Iterator begin() const { return {first_, stride_, end_}; }
  ETNN_HD constexpr End end() const { return {}; }

 private:
  std::size_t first_, stride_, end_;
};

// Blocks of threads_per_block threads for a grid-stride loop over n items: one item per thread up
// to max_grid_blocks blocks (2^28 items at 256 threads; a bandwidth-bound update wants every load
// it can have in flight; a thread's items cannot overlap, as its loads may alias its stores), then
// several per thread. At least one block, so that n = 0 is still a valid launch.
inline constexpr std::size_t max_grid_blocks = std::size_t{1} << 20;
constexpr unsigned grid_blocks(std::size_t n, unsigned threads_per_block = 256) {
  const std::size_t wanted = (n + threads_per_block - 1) / threads_per_block;
  return static_cast<unsigned>(wanted < 1 ? 1 : (wanted > max_grid_blocks ? max_grid_blocks : wanted));
}

}  // namespace etnn::cuda
