#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// etnn's own float GEMM for x86-64 CPUs with AVX-512, compiled into every build (whatever its
// -march) and chosen at run time (cpu/gemm.hpp asks cpu/features.hpp):
//   C = A B  or  C += A B      A: (M, K)  B: (K, N)  C: (M, N) row-major, leading dimension ldc
// A and B may each be row- or column-major (a transposed operand is the other layout).
//
// The product is cut into tiles of C (rows x columns), which threads take one at a time. Each
// tile runs over K in blocks: it packs its block of A into panels of mr rows (k-major) and its
// block of B into panels of nr columns (k-major), zero-padded, in the calling thread's reusable
// storage, then a register tile of mr x nr accumulators (24 of the 32 vector registers) sums one
// block's products with FMAs in k order and adds them to C (the first block of C = A B stores).
//
// Bitwise independent of the thread count and the tiling: every element of C sums the same
// K blocks, whose bounds depend on K alone, each in k order; tiles only decide who computes it.
// After a tile's last block, `epilogue(row_begin, row_end, col_begin, col_end)` runs on it while
// it is in cache (bias and activation of a dense layer).
//
// Nothing is allocated but each thread's packing storage, of one size for every product
// (cpu/packing_storage.hpp), which pool workers make when they start.
#include <algorithm>
#include <array>
#include <cstddef>

#include "../core/config.hpp"
#include "../core/device.hpp"
#include "features.hpp"
#include "layout.hpp"
#include "packing_storage.hpp"
#include "thread_pool.hpp"
#include "widest_vectors.hpp"

#if ETNN_PACKED_GEMM
#include <immintrin.h>

namespace etnn::cpu::packed {

// K blocks: ceil(K / kc_max) of near-equal depth; block b covers [K b / n, K (b + 1) / n).
constexpr int k_blocks(int k) { return (k + kc_max - 1) / kc_max; }

// Mask of the first `count` lanes (all 16 for count >= 16, none for count <= 0).
inline __mmask16 first_lanes(int count) {
  if (count <= 0) return 0;
  return count >= lanes ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << count) - 1u);
}

// The mr x 16 block row[i][t] (row i, depth t) written depth-major: out[t mr + i] = row[i][t], the
// first `count` of its 16 mr values. Output register j holds positions q = 16 j + l, that is
// depth t = q / mr of row i = q % mr: one permute by t per row, merged under the lanes of row i.
[[gnu::target("avx512f"), gnu::always_inline]] inline void interleave_rows(const __m512 row[mr], float* out,
                                                                           int count) {
  static_assert(mr <= lanes);
  static constexpr auto depth_of = [] {
    std::array<int, mr * lanes> d{};
    for (int q = 0; q < mr * lanes; ++q) d[q] = q / mr;
    return d;
  }();
  static constexpr auto lanes_of_row = [] {  // [j][i]: the lanes of output register j from row i
    std::array<std::array<unsigned, mr>, mr> m{};
    for (int q = 0; q < mr * lanes; ++q) m[q / lanes][q % mr] |= 1u << (q % lanes);
    return m;
  }();
ETNN_UNROLL(6)
  for (int j = 0; j < mr; ++j) {
    const __m512i depth = _mm512_loadu_si512(depth_of.data() + j * lanes);
    __m512 v = _mm512_setzero_ps();
ETNN_UNROLL(6)
    for (int i = 0; i < mr; ++i)
      v = _mm512_mask_permutexvar_ps(v, static_cast<__mmask16>(lanes_of_row[j][i]), depth, row[i]);
    _mm512_mask_storeu_ps(out + j * lanes, first_lanes(count - j * lanes), v);
  }
}

// Packs rows [r0, r0 + rows) and depth [k0, k0 + kc) of A into panels of mr rows:
// panel p holds A(r0 + mr p + i, k0 + kk) at p mr kc + kk mr + i, rows past the end as zeros.
template <Layout LA>
[[gnu::target("avx512f")]] void pack_a(const float* a, std::ptrdiff_t lda, int r0, int rows, int k0, int kc,
                                       float* out) {
  for (int p = 0; p * mr < rows; ++p) {
    float* panel = out + static_cast<std::ptrdiff_t>(p) * mr * kc;
    const int valid = std::min(mr, rows - p * mr);
    if constexpr (LA == Layout::col_major) {  // A(i, k) at a[k lda + i]: mr contiguous values per k
      const __mmask16 mask = first_lanes(valid);
      const float* column = a + static_cast<std::ptrdiff_t>(k0) * lda + r0 + p * mr;
      for (int kk = 0; kk < kc; ++kk) {
        const __m512 v = _mm512_maskz_loadu_ps(mask, column + kk * lda);
        _mm512_mask_storeu_ps(panel + kk * mr, first_lanes(mr), v);
      }
    } else {  // A(i, k) at a[i lda + k]: 16 depths of each row at a time, interleaved in registers
      const float* rows_at[mr];
      for (int i = 0; i < mr; ++i) rows_at[i] = a + static_cast<std::ptrdiff_t>(r0 + p * mr + std::min(i, valid - 1)) * lda + k0;
      for (int kk = 0; kk < kc; kk += lanes) {
        const int depth = std::min(lanes, kc - kk);
        __m512 row[mr];
ETNN_UNROLL(6)
        for (int i = 0; i < mr; ++i)
          row[i] = i < valid ? _mm512_maskz_loadu_ps(first_lanes(depth), rows_at[i] + kk) : _mm512_setzero_ps();
        interleave_rows(row, panel + kk * mr, depth * mr);
      }
    }
  }
}

// Transposes the 16 x 16 block r[0..16) in registers: afterwards r[i] holds lane i of every input.
[[gnu::target("avx512f"), gnu::always_inline]] inline void transpose16(__m512 r[16]) {
  __m512 t[16];
ETNN_UNROLL(8)
  for (int i = 0; i < 16; i += 2) {  // pairs of rows, interleaved by element
    // The masked forms with every lane set, here and below: GCC 12's unmasked ones warn of an
    // uninitialised operand (_mm512_undefined_*, GCC bug 105593) in every program built with -Wall.
    t[i] = _mm512_mask_unpacklo_ps(r[i], 0xFFFF, r[i], r[i + 1]);
    t[i + 1] = _mm512_mask_unpackhi_ps(r[i], 0xFFFF, r[i], r[i + 1]);
  }
ETNN_UNROLL(4)
  for (int i = 0; i < 16; i += 4) {  // pairs of those, interleaved by element pair
ETNN_UNROLL(2)
    for (int j = 0; j < 2; ++j) {
      const __m512d lo = _mm512_castps_pd(t[i + j]), hi = _mm512_castps_pd(t[i + j + 2]);
      r[i + 2 * j] = _mm512_castpd_ps(_mm512_mask_unpacklo_pd(lo, 0xFF, lo, hi));
      r[i + 2 * j + 1] = _mm512_castpd_ps(_mm512_mask_unpackhi_pd(lo, 0xFF, lo, hi));
    }
  }
ETNN_UNROLL(2)
  for (int i = 0; i < 16; i += 8) {  // 128-bit lanes: even and odd of each pair of quads
ETNN_UNROLL(4)
    for (int j = 0; j < 4; ++j) {
      t[i + j] = _mm512_mask_shuffle_f32x4(r[i + j], 0xFFFF, r[i + j], r[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_mask_shuffle_f32x4(r[i + j], 0xFFFF, r[i + j], r[i + j + 4], 0xdd);
    }
  }
ETNN_UNROLL(8)
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_mask_shuffle_f32x4(t[j], 0xFFFF, t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_mask_shuffle_f32x4(t[j], 0xFFFF, t[j], t[j + 8], 0xdd);
  }
}

// Packs depth [k0, k0 + kc) and columns [c0, c0 + cols) of B into panels of nr columns: panel q
// holds B(k0 + kk, c0 + nr q + j) at q kc nr + kk nr + j, columns past the end as zeros. Packed
// panels are read with unit stride whatever B's leading dimension (a row-major B with a stride of
// 4 KiB would put every row of a panel in the same L1 set). A column-major B (B(k, j) at
// b[j ldb + k]) is transposed 16 x 16 at a time in registers.
template <Layout LB>
[[gnu::target("avx512f")]] void pack_b(const float* b, std::ptrdiff_t ldb, int k0, int kc, int c0, int cols,
                                       float* out) {
  for (int q = 0; q * nr < cols; ++q) {
    float* panel = out + static_cast<std::ptrdiff_t>(q) * kc * nr;
    for (int v = 0; v < nr / lanes; ++v) {
      const int first = q * nr + v * lanes;
      const int valid = std::max(0, std::min(lanes, cols - first));
      if constexpr (LB == Layout::row_major) {  // B(k, j) at b[k ldb + j]: 16 contiguous columns
        const __mmask16 mask = first_lanes(valid);
        for (int kk = 0; kk < kc; ++kk) {
          _mm512_storeu_ps(panel + kk * nr + v * lanes,
                           _mm512_maskz_loadu_ps(mask, b + static_cast<std::ptrdiff_t>(k0 + kk) * ldb + c0 + first));
        }
      } else {
        for (int kk = 0; kk < kc; kk += lanes) {
          const int depth = std::min(lanes, kc - kk);
          const __mmask16 mask = first_lanes(depth);
          __m512 block[16];
ETNN_UNROLL(16)
          for (int j = 0; j < lanes; ++j) {  // block[j]: column first + j, depths kk .. kk + 15
            block[j] = j < valid ? _mm512_maskz_loadu_ps(mask, b + static_cast<std::ptrdiff_t>(c0 + first + j) * ldb +
                                                                   k0 + kk)
                                 : _mm512_setzero_ps();
          }
          transpose16(block);  // block[d]: depth kk + d, columns first .. first + 15
          for (int d = 0; d < depth; ++d) _mm512_storeu_ps(panel + (kk + d) * nr + v * lanes, block[d]);
        }
      }
    }
  }
}

// One register tile: C[0..rows, 0..cols) (+)= sum_kk A(r, kk) bp[kk], with Vectors = ceil(cols / 16) of the tile's 4 registers per row in use.
// acc[r][v] holds C(r, 16 v .. 16 v + 15). Lanes past `cols` are neither loaded nor stored.
// A(r, kk) is ap[kk mr + r] in a packed panel, or ap[r lda + kk] read straight from a row-major A
// (Direct; then all mr rows must exist): the same values, multiplied and added in the same order.
template <int Vectors, bool Direct>
[[gnu::target("avx512f")]] inline void register_tile(int kc, const float* ap, std::ptrdiff_t lda, const float* bp,
                                                     float* c, std::ptrdiff_t ldc, int rows, int cols, bool store) {
  const std::ptrdiff_t a_depth = Direct ? 1 : mr, a_row = Direct ? lda : 1;
  __m512 acc[mr][Vectors];
  __mmask16 mask[Vectors];
ETNN_UNROLL(4)
  for (int v = 0; v < Vectors; ++v) mask[v] = first_lanes(cols - v * lanes);
ETNN_UNROLL(8)
  for (int r = 0; r < mr; ++r) {
ETNN_UNROLL(4)
    for (int v = 0; v < Vectors; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  for (int kk = 0; kk < kc; ++kk) {
    __m512 bv[Vectors];
ETNN_UNROLL(4)
    for (int v = 0; v < Vectors; ++v) bv[v] = _mm512_loadu_ps(bp + kk * nr + v * lanes);
ETNN_UNROLL(8)
    for (int r = 0; r < mr; ++r) {
      const __m512 av = _mm512_set1_ps(ap[kk * a_depth + r * a_row]);
ETNN_UNROLL(4)
      for (int v = 0; v < Vectors; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
ETNN_UNROLL(8)
  for (int r = 0; r < mr; ++r) {
    if (r == rows) break;
ETNN_UNROLL(4)
    for (int v = 0; v < Vectors; ++v) {
      float* out = c + r * ldc + v * lanes;
      const __m512 sum = store ? acc[r][v] : _mm512_add_ps(_mm512_maskz_loadu_ps(mask[v], out), acc[r][v]);
      _mm512_mask_storeu_ps(out, mask[v], sum);
    }
  }
}

template <bool Direct>
[[gnu::target("avx512f")]] inline void register_tile_any(int kc, const float* ap, std::ptrdiff_t lda, const float* bp,
                                                         float* c, std::ptrdiff_t ldc, int rows, int cols, bool store) {
  switch ((cols + lanes - 1) / lanes) {
    case 1: register_tile<1, Direct>(kc, ap, lda, bp, c, ldc, rows, cols, store); break;
    case 2: register_tile<2, Direct>(kc, ap, lda, bp, c, ldc, rows, cols, store); break;
    case 3: register_tile<3, Direct>(kc, ap, lda, bp, c, ldc, rows, cols, store); break;
    default: register_tile<4, Direct>(kc, ap, lda, bp, c, ldc, rows, cols, store); break;
  }
}

// Rows [r0, r1) x columns [c0, c1) of C, over every K block; the epilogue runs on each mc-row
// chunk once its last block is added. A row-major A is read in place by its whole register tiles
// (packing it would cost a pass over A per product, a quarter of the work when N is 128); only a
// chunk's last, partial tile is packed, which pads it with zero rows.
template <Layout LA, Layout LB, class Epilogue>
void gemm_tile(int r0, int r1, int c0, int c1, int k, const float* a, std::ptrdiff_t lda, const float* b,
               std::ptrdiff_t ldb, float* c, std::ptrdiff_t ldc, bool accumulate, Epilogue& epilogue) {
  const int cols = c1 - c0, col_panels = (cols + nr - 1) / nr;
  const int blocks = k_blocks(k);
  float* const packed_a = packing_storage();
  float* const packed_b = packed_a + packed_a_floats;
  for (int block = 0; block < blocks; ++block) {
    const int k0 = static_cast<int>(static_cast<long>(k) * block / blocks);
    const int kc = static_cast<int>(static_cast<long>(k) * (block + 1) / blocks) - k0;
    pack_b<LB>(b, ldb, k0, kc, c0, cols, packed_b);
    const bool store = !accumulate && block == 0;
    for (int chunk = r0; chunk < r1; chunk += mc) {
      const int rows = std::min(mc, r1 - chunk);
      const int direct = LA == Layout::row_major ? rows / mr : 0;  // register tiles read in place
      if (direct * mr < rows) pack_a<LA>(a, lda, chunk + direct * mr, rows - direct * mr, k0, kc, packed_a);
      for (int p = 0; p * mr < rows; ++p) {
        const float* ap = p < direct ? a + static_cast<std::ptrdiff_t>(chunk + p * mr) * lda + k0
                                     : packed_a + static_cast<std::ptrdiff_t>(p - direct) * mr * kc;
        for (int q = 0; q < col_panels; ++q) {
          float* out = c + static_cast<std::ptrdiff_t>(chunk + p * mr) * ldc + c0 + q * nr;
          const float* bp = packed_b + static_cast<std::ptrdiff_t>(q) * kc * nr;
          const int height = std::min(mr, rows - p * mr), width = std::min(nr, cols - q * nr);
          if (p < direct) register_tile_any<true>(kc, ap, lda, bp, out, ldc, height, width, store);
          else register_tile_any<false>(kc, ap, lda, bp, out, ldc, height, width, store);
        }
      }
      if (block == blocks - 1) with_widest_vectors(epilogue, chunk, chunk + rows, c0, c1);
    }
  }
}

// Tiles of C: `down` bands of rows by `across` bands of columns, each band a near-equal share of
// the register tiles (mr rows) or panels (nr columns) along its side, at most tile_cols columns
// wide. Bands multiply until every thread has two tiles to take, so that a thread slowed by other
// work on its core takes fewer of them. Every band of columns packs A's rows again, and every
// band of rows packs B's columns again, so the longer side of C is split first (columns when
// N >= M, until one panel each; rows when M > N, until one register tile each), then the other.
// Equal shares keep the last tile from being a sliver (784 columns in 4 bands: 192, 192, 192,
// 208, not 256, 256, 256, 16).
struct Tiling {
  int m, n, row_tiles, panels, down, across;
  int count() const { return down * across; }
  // Band i of `bands` over `units` units of `size`, clipped to `extent`: [begin, end).
  static std::array<int, 2> band(int i, int bands, int units, int size, int extent) {
    return {static_cast<int>(static_cast<long>(units) * i / bands) * size,
            std::min(extent, static_cast<int>(static_cast<long>(units) * (i + 1) / bands) * size)};
  }
  std::array<int, 2> rows(int index) const { return band(index / across, down, row_tiles, mr, m); }
  std::array<int, 2> cols(int index) const { return band(index % across, across, panels, nr, n); }
};
inline Tiling tiling(int m, int n, int threads) {
  constexpr int panels_per_tile = tile_cols / nr;
  Tiling t{m, n, (m + mr - 1) / mr, (n + nr - 1) / nr, 1, 0};
  t.across = (t.panels + panels_per_tile - 1) / panels_per_tile;
  const bool rows_first = m > n;
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

template <Layout LA, Layout LB, class Epilogue>
void run_tile(const Tiling& t, int index, int k, const float* a, std::ptrdiff_t lda, const float* b,
              std::ptrdiff_t ldb, float* c, std::ptrdiff_t ldc, bool accumulate, Epilogue& epilogue) {
  const auto [r0, r1] = t.rows(index);
  const auto [c0, c1] = t.cols(index);
  gemm_tile<LA, LB>(r0, r1, c0, c1, k, a, lda, b, ldb, c, ldc, accumulate, epilogue);
}

// The product on `threads` threads (1: the calling thread only), which take tiles one at a
// time. The epilogue must not throw.
template <Layout LA, Layout LB, class Epilogue>
void gemm(int threads, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c, int ldc,
          bool accumulate, Epilogue& epilogue) {
  const Tiling t = tiling(m, n, threads);
  auto tile = [&](std::size_t index) {
    run_tile<LA, LB>(t, static_cast<int>(index), k, a, lda, b, ldb, c, ldc, accumulate, epilogue);
  };
  if (threads > 1 && t.count() > 1) {
    ThreadPool::instance().run(static_cast<std::size_t>(t.count()), tile);
    return;
  }
  for (int index = 0; index < t.count(); ++index) tile(static_cast<std::size_t>(index));
}

}  // namespace etnn::cpu::packed

#endif  // ETNN_PACKED_GEMM
