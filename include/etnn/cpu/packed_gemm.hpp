#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// etnn's own float GEMM for x86-64 CPUs with AVX-512 or AVX2, compiled into every build (whatever
// its -march) and chosen at run time (cpu/gemm.hpp asks cpu/features.hpp):
//   C = A B  or  C += A B      A: (M, K)  B: (K, N)  C: (M, N) row-major, leading dimension ldc
// A and B may each be row- or column-major (a transposed operand is the other layout).
//
// The product is cut into tiles of C (rows x columns), which threads take one at a time. Each
// tile runs over K in blocks: it packs its block of A into panels of mr rows (k-major) and its
// block of B into panels of nr columns (k-major), zero-padded, in the calling thread's reusable
// storage (a column-major A that several bands of columns share, and a B that several bands of
// rows share, are packed once, whole, first),
// then a register tile of mr x nr accumulators sums one block's products with FMAs in k order
// and adds them to C (the first block of C = A B stores). Kernels is the instruction
// set's packing and register tile: Avx512 (cpu/avx512_kernels.hpp, nr = 64) or Avx2
// (cpu/avx2_kernels.hpp, nr = 16).
//
// Bitwise independent of the thread count and the tiling: every element of C sums the same
// K blocks, whose bounds depend on K alone, each in k order; tiles only decide who computes it.
// After a tile's last block, `epilogue(row_begin, row_end, col_begin, col_end)` runs on it while
// it is in cache (bias and activation of a dense layer).
//
// At most 8 rows of C with a column-major B (C = X W^T at a batch of 8 or less) run narrow_tile
// instead where the kernel set has it (Avx2): the same sums in the same order, B unpacked.
//
// Nothing is allocated but each thread's packing storage, of one size for every product
// (cpu/packing_storage.hpp), which pool workers make when they start, and a caller's storage for
// a whole A and a whole B, which grow to their largest products.
#include <algorithm>
#include <array>
#include <cstddef>

#include "../core/device.hpp"
#include "avx2_kernels.hpp"
#include "avx512_kernels.hpp"
#include "features.hpp"
#include "layout.hpp"
#include "packing_storage.hpp"
#include "thread_pool.hpp"
#include "widest_vectors.hpp"

#if ETNN_PACKED_GEMM

namespace etnn::cpu::packed {

// K blocks: ceil(K / kc_max) of near-equal depth; block b covers [K b / n, K (b + 1) / n).
constexpr int k_blocks(int k) { return (k + kc_max - 1) / kc_max; }
struct KBlock {
  int k0, kc;  // first depth, depth
};
constexpr KBlock k_block(int k, int block) {
  const int blocks = k_blocks(k);
  const int k0 = static_cast<int>(static_cast<long>(k) * block / blocks);
  return {k0, static_cast<int>(static_cast<long>(k) * (block + 1) / blocks) - k0};
}

// A column-major A (dW = dZ^T X) packed once for the whole product, when several bands of
// columns would each pack it again: K block b's panels of mr rows at panels + padded_rows k0,
// the panel of rows [r, r + mr) at r kc past them (zero rows pad the last). panels == nullptr:
// each tile packs its own chunks of A.
struct WholeA {
  const float* panels = nullptr;
  int padded_rows = 0;
};

// B packed once for the whole product, when many bands of rows would each pack it again
// (gpt's products of 2048 rows by 128 or 512 columns: four bands on two threads): K block b's
// panels of nr columns at panels + padded_cols k0, the panel of columns [c, c + nr) at c kc past
// them. panels == nullptr: each tile packs its own block of B.
struct WholeB {
  const float* panels = nullptr;
  int padded_cols = 0;
};

// Rows [r0, r1) x columns [c0, c1) of C, over every K block; the epilogue runs on each mc-row
// chunk once its last block is added. A row-major A is read in place by its whole register tiles
// (packing it would cost a pass over A per product, a quarter of the work when N is 128); only a
// chunk's last, partial tile is packed, which pads it with zero rows. A column-major A comes from
// `whole_a` where it was packed whole, and B from `whole_b`.
template <class Kernels, Layout LA, Layout LB, class Epilogue>
void gemm_tile(int r0, int r1, int c0, int c1, int k, const float* a, std::ptrdiff_t lda, const float* b,
               std::ptrdiff_t ldb, float* c, std::ptrdiff_t ldc, bool accumulate, Epilogue& epilogue, WholeA whole_a,
               WholeB whole_b) {
  constexpr int nr = Kernels::nr;
  const int cols = c1 - c0, col_panels = (cols + nr - 1) / nr;
  const int blocks = k_blocks(k);
  float* const packed_a = packing_storage();
  for (int block = 0; block < blocks; ++block) {
    const auto [k0, kc] = k_block(k, block);
    const float* packed_b = packed_a + packed_a_floats;  // the block's panels of B
    if (whole_b.panels != nullptr) {
      packed_b = whole_b.panels + static_cast<std::ptrdiff_t>(whole_b.padded_cols) * k0 +
                 static_cast<std::ptrdiff_t>(c0) * kc;
    } else {
      Kernels::template pack_b<LB>(b, ldb, k0, kc, c0, cols, packed_a + packed_a_floats);
    }
    const bool store = !accumulate && block == 0;
    for (int chunk = r0; chunk < r1; chunk += mc) {
      const int rows = std::min(mc, r1 - chunk);
      const int direct = LA == Layout::row_major ? rows / mr : 0;  // register tiles read in place
      const float* chunk_a = packed_a;  // the chunk's packed panels (after its direct tiles)
      if (whole_a.panels != nullptr) {
        chunk_a = whole_a.panels + static_cast<std::ptrdiff_t>(whole_a.padded_rows) * k0 +
                  static_cast<std::ptrdiff_t>(chunk) * kc;
      } else if (direct * mr < rows) {
        Kernels::template pack_a<LA>(a, lda, chunk + direct * mr, rows - direct * mr, k0, kc, packed_a);
      }
      for (int p = 0; p * mr < rows; ++p) {
        const float* ap = p < direct ? a + static_cast<std::ptrdiff_t>(chunk + p * mr) * lda + k0
                                     : chunk_a + static_cast<std::ptrdiff_t>(p - direct) * mr * kc;
        for (int q = 0; q < col_panels; ++q) {
          float* out = c + static_cast<std::ptrdiff_t>(chunk + p * mr) * ldc + c0 + q * nr;
          const float* bp = packed_b + static_cast<std::ptrdiff_t>(q) * kc * nr;
          const int height = std::min(mr, rows - p * mr), width = std::min(nr, cols - q * nr);
          if (p < direct) Kernels::template register_tile_any<true>(kc, ap, lda, bp, out, ldc, height, width, store);
          else Kernels::template register_tile_any<false>(kc, ap, lda, bp, out, ldc, height, width, store);
        }
      }
      if (block == blocks - 1) with_widest_vectors(epilogue, chunk, chunk + rows, c0, c1);
    }
  }
}

// Whether the kernel set reads a column-major B in place for C of at most narrow_rows rows.
template <class Kernels>
constexpr bool has_narrow_path = requires { Kernels::narrow_rows; };

// Rows [r0, r1) (at most Kernels::narrow_rows) x columns [c0, c1) of C = A B with a column-major
// B, over every K block (the same blocks as gemm_tile's): A's few rows are packed, B's columns
// are streamed once from where they lie. The epilogue runs once all blocks are added.
template <class Kernels, Layout LA, class Epilogue>
void narrow_tile(int r0, int r1, int c0, int c1, int k, const float* a, std::ptrdiff_t lda, const float* b,
                 std::ptrdiff_t ldb, float* c, std::ptrdiff_t ldc, bool accumulate, Epilogue& epilogue) {
  static_assert(std::size_t{Kernels::narrow_rows} * kc_max <= packed_a_floats, "A's packed rows fit A's storage");
  float* const packed_a = packing_storage();
  const int blocks = k_blocks(k);
  for (int block = 0; block < blocks; ++block) {
    const auto [k0, kc] = k_block(k, block);
    Kernels::template pack_a_lanes<LA>(a, lda, r0, r1 - r0, k0, kc, packed_a);
    Kernels::narrow_block(kc, packed_a, b + k0, ldb, c + static_cast<std::ptrdiff_t>(r0) * ldc, ldc, r1 - r0, c0, c1,
                          !accumulate && block == 0);
  }
  with_widest_vectors(epilogue, r0, r1, c0, c1);
}

// Tiles of C: `down` bands of rows by `across` bands of columns, each band a near-equal share of
// the register tiles (mr rows) or panels (nr columns) along its side, at most tile_cols columns
// wide. Bands multiply until every thread has two tiles to take, so that a thread slowed by other
// work on its core takes fewer of them. Every band of columns packs A's rows again (unless A is
// packed whole), and every band of rows packs B's columns again, so the longer side of C is split
// first (columns when N >= M, until one panel each; rows when M > N, until one register tile
// each), then the other. A shallow product (one K block: dW = dZ^T X at a batch of at most
// kc_max) splits rows first whatever its shape, into at least a band for each thread, when every
// thread can have two: two cores writing the same rows of C side by side ran 512 x 784 x 64 at
// 0.65-0.75 of the rate they reach on rows of their own (2-core AVX2 Zen 4 VM), and repacking B
// costs little at that depth (deeper products lost by it: mlp784/64's forward). Tile i is row
// band i % down and column band i / down, so that tiles taken together lie in different rows.
// Equal shares keep the last tile from being a sliver (784 columns in 4 bands: 192, 192, 192,
// 208, not 256, 256, 256, 16).
struct Tiling {
  int m, n, nr, row_tiles, panels, down, across;
  int count() const { return down * across; }
  // Band i of `bands` over `units` units of `size`, clipped to `extent`: [begin, end).
  static std::array<int, 2> band(int i, int bands, int units, int size, int extent) {
    return {static_cast<int>(static_cast<long>(units) * i / bands) * size,
            std::min(extent, static_cast<int>(static_cast<long>(units) * (i + 1) / bands) * size)};
  }
  std::array<int, 2> rows(int index) const { return band(index % down, down, row_tiles, mr, m); }
  std::array<int, 2> cols(int index) const { return band(index / down, across, panels, nr, n); }
};
inline Tiling tiling(int m, int n, int k, int threads, int nr) {
  const int panels_per_tile = tile_cols / nr;
  Tiling t{m, n, nr, (m + mr - 1) / mr, (n + nr - 1) / nr, 1, 0};
  t.across = (t.panels + panels_per_tile - 1) / panels_per_tile;
  const bool rows_first = m > n || (k <= kc_max && t.row_tiles >= 2 * threads);
  if (rows_first) t.down = std::min(t.row_tiles, std::max(threads, 1));  // at least a band of rows each
  while (threads > 1 && t.count() < 2 * threads) {
    const bool can_across = t.across < t.panels, can_down = t.down < t.row_tiles;
    if (can_down && (rows_first || !can_across)) {
      t.down = std::min(t.row_tiles, 2 * t.down);
    } else if (can_across) {
      t.across = std::min(t.panels, 2 * t.across);
    } else {
      break;
    }
  }
  return t;
}

// Whether the product takes narrow_tile: at most narrow_rows rows of C and a column-major B.
template <class Kernels, Layout LB>
constexpr bool takes_narrow_path(int m) {
  if constexpr (has_narrow_path<Kernels> && LB == Layout::col_major) return m <= Kernels::narrow_rows;
  return false;
}

template <class Kernels, Layout LA, Layout LB, class Epilogue>
void run_tile(const Tiling& t, int index, int k, const float* a, std::ptrdiff_t lda, const float* b,
              std::ptrdiff_t ldb, float* c, std::ptrdiff_t ldc, bool accumulate, Epilogue& epilogue, WholeA whole_a,
              WholeB whole_b) {
  const auto [r0, r1] = t.rows(index);
  const auto [c0, c1] = t.cols(index);
  if constexpr (has_narrow_path<Kernels> && LB == Layout::col_major) {
    if (takes_narrow_path<Kernels, LB>(t.m)) {
      narrow_tile<Kernels, LA>(r0, r1, c0, c1, k, a, lda, b, ldb, c, ldc, accumulate, epilogue);
      return;
    }
  }
  gemm_tile<Kernels, LA, LB>(r0, r1, c0, c1, k, a, lda, b, ldb, c, ldc, accumulate, epilogue, whole_a, whole_b);
}

// The operands that tiles would pack more than once, packed whole first into the calling thread's
// storage: a column-major A when there is more than one band of columns, and B when there are
// four bands of rows or more, each if it fits whole_operand_max_floats. (With two bands, repacking
// B in each tile cost less than packing it in a pool job of its own: mlp784/64's dW, 512 x 784 x
// 64, lost 5% on 2 threads; gpt's products of 2048 rows, in four bands, gained about 2%.) Only a
// caller outside any pool job packs whole, so that its storage grows in the first step only. On
// more than one thread the threads pack them together, each job a band of whole register tiles of
// A or of panels of B (of every K block): packed on the caller alone, while the others waited, they
// were a serial stretch of every product. Operands of less than 2^16 floats in all (mlp784's A at
// a batch of 8: 512 x 8) are still packed by the caller. The packed values are the tiles' own, so results do not change.
struct WholeOperands {
  WholeA a;
  WholeB b;
};
inline constexpr int whole_b_min_row_bands = 4;
template <class Kernels, Layout LA, Layout LB>
WholeOperands pack_whole_operands(const Tiling& t, int threads, int k, const float* a, std::ptrdiff_t lda,
                                  const float* b, std::ptrdiff_t ldb) {
  if (takes_narrow_path<Kernels, LB>(t.m) || ThreadPool::inside_job()) return {};
  const int padded_rows = t.row_tiles * mr, padded_cols = t.panels * Kernels::nr;
  const std::size_t a_floats = static_cast<std::size_t>(padded_rows) * static_cast<std::size_t>(k);
  const std::size_t b_floats = static_cast<std::size_t>(padded_cols) * static_cast<std::size_t>(k);
  const auto whole_a_on = [&](const Tiling& on) {
    return LA == Layout::col_major && on.across > 1 && a_floats <= whole_operand_max_floats;
  };
  const auto whole_b_on = [&](const Tiling& on) {
    return on.down >= whole_b_min_row_bands && b_floats <= whole_operand_max_floats;
  };
  const bool whole_a = whole_a_on(t), whole_b = whole_b_on(t);
  // The storage is sized for the pool's whole thread count even while the product runs on fewer
  // (the pool runs jobs on their callers alone for a while when its workers lack a CPU, see
  // cpu/thread_pool.hpp): a warm-up step run that way must not leave a later step to allocate.
  const int pool_threads = ThreadPool::instance().threads();
  const Tiling all_threads = threads == pool_threads ? t : tiling(t.m, t.n, k, pool_threads, Kernels::nr);
  float* const a_panels = whole_a || whole_a_on(all_threads) ? whole_a_storage(a_floats) : nullptr;
  float* const b_panels = whole_b || whole_b_on(all_threads) ? whole_b_storage(b_floats) : nullptr;
  if (!whole_a && !whole_b) return {};
  constexpr std::size_t shared_packing_min_floats = std::size_t{1} << 16;  // below, a pool job costs more than it saves
  const bool shared = (whole_a ? a_floats : 0) + (whole_b ? b_floats : 0) >= shared_packing_min_floats;
  const int a_bands = !whole_a ? 0 : shared ? std::max(1, std::min(threads, t.row_tiles)) : 1;
  const int b_bands = !whole_b ? 0 : shared ? std::max(1, std::min(threads, t.panels)) : 1;
  auto pack_band = [&](std::size_t job) {
    const int band = static_cast<int>(job);
    for (int block = 0; block < k_blocks(k); ++block) {
      const auto [k0, kc] = k_block(k, block);
      if (band < a_bands) {
        const auto [r0, r1] = Tiling::band(band, a_bands, t.row_tiles, mr, t.m);
        Kernels::template pack_a<LA>(a, lda, r0, r1 - r0, k0, kc,
                                     a_panels + static_cast<std::ptrdiff_t>(padded_rows) * k0 +
                                         static_cast<std::ptrdiff_t>(r0) * kc);
      } else {
        const auto [c0, c1] = Tiling::band(band - a_bands, b_bands, t.panels, Kernels::nr, t.n);
        Kernels::template pack_b<LB>(b, ldb, k0, kc, c0, c1 - c0,
                                     b_panels + static_cast<std::ptrdiff_t>(padded_cols) * k0 +
                                         static_cast<std::ptrdiff_t>(c0) * kc);
      }
    }
  };
  const int jobs = a_bands + b_bands;
  if (threads > 1 && jobs > 1) {
    ThreadPool::instance().run(static_cast<std::size_t>(jobs), pack_band);
  } else {
    for (int job = 0; job < jobs; ++job) pack_band(static_cast<std::size_t>(job));
  }
  return {{whole_a ? a_panels : nullptr, padded_rows}, {whole_b ? b_panels : nullptr, padded_cols}};
}

// The product on `threads` threads (1: the calling thread only), which take tiles one at a
// time, on Kernels' instructions (which the CPU must have). The epilogue must not throw.
template <class Kernels, Layout LA, Layout LB, class Epilogue>
void gemm(int threads, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c, int ldc,
          bool accumulate, Epilogue& epilogue) {
  const Tiling t = tiling(m, n, k, threads, Kernels::nr);
  const WholeOperands whole = pack_whole_operands<Kernels, LA, LB>(t, threads, k, a, lda, b, ldb);
  auto tile = [&](std::size_t index) {
    run_tile<Kernels, LA, LB>(t, static_cast<int>(index), k, a, lda, b, ldb, c, ldc, accumulate, epilogue, whole.a,
                              whole.b);
  };
  if (threads > 1 && t.count() > 1) {
    ThreadPool::instance().run(static_cast<std::size_t>(t.count()), tile);
    return;
  }
  for (int index = 0; index < t.count(); ++index) tile(static_cast<std::size_t>(index));
}

}  // namespace etnn::cpu::packed

#endif  // ETNN_PACKED_GEMM
