#pragma once
// Private to dist/: include <etnn/dist/mpi.hpp>, which uses it.
// The allreduce of etnn::dist::Mpi when every rank runs on one machine: through shared memory
// windows (shared_window.hpp) instead of MPI's messages. A generic allreduce copies each rank's
// data through the transport's buffers several times; here a value crosses between ranks only
// where it must. Each rank owns a share of the values (cut at cache lines) and sums it, every
// element once, by its owner, in rank order: every rank gets the same bits.
//
// In place, for data already in a window (SharedStorage: a data-parallel optimizer's gradients):
//   1. barrier   2. for its share: sum = segment_0 + ... + segment_{N-1}, written to every
//   segment, and whether its share of the sum holds a NaN or an infinity, written to its note
//   3. barrier   4. the notes read: whether the whole sum is finite (the non-finite guard's test,
//   without a pass of its own over the sum). Per rank and value: one read and one write, nothing
//   copied in or out. Segments are page-aligned, so shares are cut at cache lines of the segment
//   (a bucket starts wherever its first layer does). A rank writes its note again only after the
//   next sum's first barrier, which every rank passes after reading the notes of this one.
//
// Through slots, for any other buffer: a window of 2 sets of `size` slots of `slot_values` values
// (the sets alternate between chunks); per chunk of at most slot_values values, with rank r's
// share [lo_r, hi_r) of the chunk and term_r = data (own, private) for r == me, slot[r] (published)
// otherwise:
//     1. slot[me][share_r] = data[share_r] for r != me    4. barrier
//     2. barrier                                           5. data[share_r] = slot[r][share_r], r != me
//     3. data[share_me] = slot[me][share_me] = sum_r term_r[share_me], ranks in order
// Per rank and value that is 2 (N - 1) / N copies, one sum and 1 / N extra write (the owner's
// result goes to its buffer and its slot), against 2 copies and a sum when each rank publishes
// all its data. A set is written again two chunks later, after a barrier that every rank passes
// only once it has finished reading it (step 5 precedes the next chunk's step 2).
//
// Barriers are the caller's (Mpi's, with its deadline), so a rank that stops taking part is
// reported, not waited for.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>

#include "../backend/non_finite.hpp"
#include "../core/device.hpp"
#include "shared_window.hpp"

namespace etnn::dist::detail {

// Rank r's share [lo, hi) of `count` values among `ranks`, where the values start at index
// `start` of a cache-line-aligned array: cut where start + i is a multiple of 16 values (a cache
// line of floats, two of doubles), so no two ranks write one cache line.
inline std::pair<std::size_t, std::size_t> share_of(std::size_t count, int r, int ranks, std::size_t start = 0) {
  const std::size_t head = start % 16;  // the values sit at [head, head + count) of whole lines
  const std::size_t lines = (head + count + 15) / 16;
  const auto at = [&](int k) {
    const std::size_t cut = lines * static_cast<std::size_t>(k) / static_cast<std::size_t>(ranks) * 16;
    return std::min(count, cut > head ? cut - head : 0);
  };
  return {at(r), at(r + 1)};
}

// For each block [begin, begin + m) of [lo, hi): sum[i] = ((term(0, begin)[i] + term(1, begin)[i])
// + ...) + term(ranks - 1, begin)[i], then store(begin, sum, m). Blocks stay in registers and L1.
template <class T, class Term, class Store>
void sum_in_rank_order(std::size_t lo, std::size_t hi, int ranks, Term&& term, Store&& store) {
  constexpr std::size_t block = 512;
  T sum[block];
  for (std::size_t begin = lo; begin < hi; begin += block) {
    const std::size_t m = std::min(block, hi - begin);
    std::memcpy(sum, term(0, begin), m * sizeof(T));
    for (int r = 1; r < ranks; ++r) {
      const T* theirs = term(r, begin);
      if (m == block)  // a constant trip count, which compilers vectorise at -O2 as well
        for (std::size_t i = 0; i < block; ++i) sum[i] += theirs[i];
      else
        for (std::size_t i = 0; i < m; ++i) sum[i] += theirs[i];
    }
    store(begin, static_cast<const T*>(sum), m);
  }
}

// A barrier with memory synchronisation of `window` on both sides.
template <class Barrier>
void synchronised(const SharedWindow& window, Barrier& barrier) {
  window.sync();
  barrier();
  window.sync();
}

// The n values at byte `offset` of every rank's segment of `window` = their sum over ranks, in
// every segment (every rank passes the same offset and n). barrier() synchronises the ranks.
// Returns whether the sum holds no NaN and no infinity (the same verdict on every rank).
template <class T, class Barrier>
bool sum_in_place(const SharedWindow& window, std::size_t offset, std::size_t n, Barrier&& barrier) {
  const int ranks = window.ranks();
  const auto values = [&](int r) { return reinterpret_cast<T*>(window.segment(r) + offset); };
  const auto non_finite = [&](int r) { return reinterpret_cast<volatile int*>(window.note(r)); };
  synchronised(window, barrier);
  const auto [lo, hi] = share_of(n, window.rank(), ranks, offset / sizeof(T));
  int mine = 0;
  sum_in_rank_order<T>(
      lo, hi, ranks, [&](int r, std::size_t begin) { return values(r) + begin; },
      [&](std::size_t begin, const T* sum, std::size_t m) {
        for (int r = 0; r < ranks; ++r) std::memcpy(values(r) + begin, sum, m * sizeof(T));
        mine |= backend::last_non_finite(Cpu{}, sum, m) != m ? 1 : 0;  // the guard's own scan, on L1
      });
  *non_finite(window.rank()) = mine;
  synchronised(window, barrier);
  int any = 0;
  for (int r = 0; r < ranks; ++r) any |= *non_finite(r);
  return any == 0;
}

class SharedMemorySum {
 public:
  // Messages at least this large go through shared memory (at 1 KiB its two barriers already beat
  // Open MPI's allreduce: 2.9 against 3.5 us on 2 ranks); smaller ones stay with MPI.
  static constexpr std::size_t min_bytes = std::size_t{1} << 10;
  static constexpr std::size_t slot_bytes = std::size_t{2} << 20;

  // Collective over `node` (every rank of the job, on one machine). Leaves this unusable, without
  // an error, where the MPI library or the machine cannot give the window.
  void create(MPI_Comm node) { window_.allocate(node, 2 * slot_bytes); }

  // Frees the window (collective); before MPI_Finalize.
  void release() { window_.free(); }

  bool usable() const noexcept { return window_.held() && window_.ranks() > 1; }
  bool takes(std::size_t bytes) const noexcept { return usable() && bytes >= min_bytes; }

  // data = sum over ranks of data (every rank passes the same n). barrier() synchronises the ranks.
  template <class T, class Barrier>
  void sum(T* data, std::size_t n, Barrier&& barrier) {
    constexpr std::size_t slot_values = slot_bytes / sizeof(T);
    const int me = window_.rank(), ranks = window_.ranks();
    for (std::size_t begin = 0; begin < n; begin += slot_values) {
      const std::size_t count = std::min(slot_values, n - begin);
      const std::size_t set = next_set_;
      next_set_ ^= 1;
      T* chunk = data + begin;
      for_other_shares(count, [&](int, std::size_t first, std::size_t m) {
        std::memcpy(slot<T>(me, set) + first, chunk + first, m * sizeof(T));
      });
      synchronised(window_, barrier);
      const auto [lo, hi] = share_of(count, me, ranks);
      sum_in_rank_order<T>(
          lo, hi, ranks, [&](int r, std::size_t at) -> const T* { return (r == me ? chunk : slot<T>(r, set)) + at; },
          [&](std::size_t at, const T* sum, std::size_t m) {
            std::memcpy(chunk + at, sum, m * sizeof(T));
            std::memcpy(slot<T>(me, set) + at, sum, m * sizeof(T));
          });
      synchronised(window_, barrier);
      for_other_shares(count, [&](int r, std::size_t first, std::size_t m) {
        std::memcpy(chunk + first, slot<T>(r, set) + first, m * sizeof(T));
      });
    }
  }

 private:
  // Each rank's segment is [set 0 slot | set 1 slot].
  template <class T>
  T* slot(int r, std::size_t set) const {
    return reinterpret_cast<T*>(window_.segment(r) + set * slot_bytes);
  }

  // f(r, first, values) for every other rank r's share [first, first + values) of a chunk.
  template <class F>
  void for_other_shares(std::size_t count, F&& f) const {
    for (int r = 0; r < window_.ranks(); ++r) {
      const auto [first, last] = share_of(count, r, window_.ranks());
      if (r != window_.rank()) f(r, first, last - first);
    }
  }

  SharedWindow window_;
  std::size_t next_set_ = 0;
};

}  // namespace etnn::dist::detail
