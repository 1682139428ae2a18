#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// The packed GEMM's kernels for x86-64 CPUs with AVX2 and FMA but no AVX-512 (cpu/packed_gemm.hpp
// runs them): 8 floats a register, register tiles of mr x 16 (12 of the 16 vector registers
// accumulate, 2 hold B's row, 1 the broadcast of A). Compiled into every x86-64 build whatever
// its -march (target attributes), so that a portable build on such a CPU gets them instead of
// Eigen's SSE2 kernels; run where cpu/features.hpp finds AVX2 and FMA and no AVX-512.
//   pack_a:   rows of A into panels of mr rows, k-major, zero-padded
//   pack_b:   columns of B into panels of nr columns, k-major, zero-padded
//   register_tile_any: C[0..rows, 0..cols) (+)= one K block of A's panel times B's panel
//   pack_a_lanes, narrow_block: the same for at most 8 rows of C and a column-major B read in place
// The same layouts and the same order of every sum as cpu/avx512_kernels.hpp's, at half the width.
#include <algorithm>
#include <cstddef>

#include "../core/config.hpp"
#include "features.hpp"
#include "layout.hpp"
#include "packing_storage.hpp"
#include "copied_panels.hpp"

#if ETNN_PACKED_GEMM
#include <immintrin.h>

namespace etnn::cpu::packed {

struct Avx2 {
  static constexpr int lanes = 8;             // floats per register
  static constexpr int vectors = 2;           // registers per row of a register tile
  static constexpr int nr = lanes * vectors;  // columns of a register tile

  // Lane l set (all bits) when l < count: the mask of AVX2's masked loads and stores, which
  // neither read nor fault past it.
  [[gnu::target("avx2,fma"), gnu::always_inline]] static __m256i first_lanes(int count) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }

  // Packs rows [r0, r0 + rows) and depth [k0, k0 + kc) of A into panels of mr rows:
  // panel p holds A(r0 + mr p + i, k0 + kk) at p mr kc + kk mr + i, rows past the end as zeros.
  // A row-major A is packed only for a partial last register tile (the driver reads whole ones in
  // place), so its element-wise loop costs kc mr reads per chunk of C's rows.
  template <Layout LA>
  [[gnu::target("avx2,fma")]] static void pack_a(const float* a, std::ptrdiff_t lda, int r0, int rows, int k0, int kc,
                                                 float* out) {
    if constexpr (LA == Layout::col_major) {  // A(i, k) at a[k lda + i]: cpu/copied_panels.hpp
      pack_column_major_a<mr>(a, lda, r0, rows, k0, kc, out);
    } else {  // A(i, k) at a[i lda + k]
      for (int p = 0; p * mr < rows; ++p) {
        float* panel = out + static_cast<std::ptrdiff_t>(p) * mr * kc;
        const int valid = std::min(mr, rows - p * mr);
        for (int kk = 0; kk < kc; ++kk) {
          for (int i = 0; i < mr; ++i) {
            panel[kk * mr + i] = i < valid ? a[static_cast<std::ptrdiff_t>(r0 + p * mr + i) * lda + k0 + kk] : 0.0f;
          }
        }
      }
    }
  }

  // Transposes the 8 x 8 block r[0..8) in registers: afterwards r[i] holds lane i of every input.
  [[gnu::target("avx2,fma"), gnu::always_inline]] static void transpose8(__m256 r[8]) {
    __m256 t[8], s[8];
ETNN_UNROLL(4)
    for (int i = 0; i < 8; i += 2) {  // t[i] = r[i][0] r[i+1][0] r[i][1] r[i+1][1] | the same of lanes 4, 5
      t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);  // lanes 2, 3 | 6, 7
    }
ETNN_UNROLL(2)
    for (int i = 0; i < 8; i += 4) {  // s[i + j]: lane j | lane j + 4 of rows i .. i + 3
      s[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
      s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
      s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
      s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
ETNN_UNROLL(4)
    for (int j = 0; j < 4; ++j) {  // 128-bit halves: rows 0 .. 3 beside rows 4 .. 7
      r[j] = _mm256_permute2f128_ps(s[j], s[j + 4], 0x20);
      r[j + 4] = _mm256_permute2f128_ps(s[j], s[j + 4], 0x31);
    }
  }

  // Packs depth [k0, k0 + kc) and columns [c0, c0 + cols) of B into panels of nr columns: panel q
  // holds B(k0 + kk, c0 + nr q + j) at q kc nr + kk nr + j, columns past the end as zeros up to
  // the end of their vector (whole vectors past it are left unwritten: no register tile reads them). A
  // row-major B is copied by groups of rows (cpu/copied_panels.hpp); a column-major B (B(k, j)
  // at b[j ldb + k]) is transposed 8 x 8 at a time in registers.
  template <Layout LB>
  [[gnu::target("avx2,fma")]] static void pack_b(const float* b, std::ptrdiff_t ldb, int k0, int kc, int c0, int cols,
                                                 float* out) {
    if constexpr (LB == Layout::row_major) {
      pack_row_major_b<nr, lanes>(b, ldb, k0, kc, c0, cols, out);
    } else {
      for (int q = 0; q * nr < cols; ++q) {
        float* panel = out + static_cast<std::ptrdiff_t>(q) * kc * nr;
        for (int v = 0; v < vectors; ++v) {
          const int first = q * nr + v * lanes;
          const int valid = std::min(lanes, cols - first);
          if (valid <= 0) break;  // vectors past the last column are never read (register_tile)
          for (int kk = 0; kk < kc; kk += lanes) {
            const int depth = std::min(lanes, kc - kk);
            const __m256i mask = first_lanes(depth);
            __m256 block[8];
ETNN_UNROLL(8)
            for (int j = 0; j < lanes; ++j) {  // block[j]: column first + j, depths kk .. kk + 7
              block[j] = j < valid ? _mm256_maskload_ps(b + static_cast<std::ptrdiff_t>(c0 + first + j) * ldb + k0 + kk,
                                                        mask)
                                   : _mm256_setzero_ps();
            }
            transpose8(block);  // block[d]: depth kk + d, columns first .. first + 7
            for (int d = 0; d < depth; ++d) _mm256_storeu_ps(panel + (kk + d) * nr + v * lanes, block[d]);
          }
        }
      }
    }
  }

  // One register tile: C[0..rows, 0..cols) (+)= sum_kk A(r, kk) bp[kk], with Vectors =
  // ceil(cols / 8) of the tile's 2 registers per row in use; acc[r][v] holds C(r, 8 v .. 8 v + 7).
  // Lanes past `cols` are neither loaded nor stored. A(r, kk) is ap[kk mr + r] in a packed panel,
  // or ap[r lda + kk] read straight from a row-major A (Direct; then all mr rows must exist).
  template <int Vectors, bool Direct>
  [[gnu::target("avx2,fma")]] static void register_tile(int kc, const float* ap, std::ptrdiff_t lda, const float* bp,
                                                        float* c, std::ptrdiff_t ldc, int rows, int cols, bool store) {
    const std::ptrdiff_t a_depth = Direct ? 1 : mr, a_row = Direct ? lda : 1;
    __m256 acc[mr][Vectors];
ETNN_UNROLL(6)
    for (int r = 0; r < mr; ++r) {
ETNN_UNROLL(2)
      for (int v = 0; v < Vectors; ++v) acc[r][v] = _mm256_setzero_ps();
    }
    for (int kk = 0; kk < kc; ++kk) {
      __m256 bv[Vectors];
ETNN_UNROLL(2)
      for (int v = 0; v < Vectors; ++v) bv[v] = _mm256_loadu_ps(bp + kk * nr + v * lanes);
ETNN_UNROLL(6)
      for (int r = 0; r < mr; ++r) {
        const __m256 av = _mm256_broadcast_ss(ap + kk * a_depth + r * a_row);
ETNN_UNROLL(2)
        for (int v = 0; v < Vectors; ++v) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
      }
    }
ETNN_UNROLL(6)
    for (int r = 0; r < mr; ++r) {
      if (r == rows) break;
ETNN_UNROLL(2)
      for (int v = 0; v < Vectors; ++v) {
        float* out = c + r * ldc + v * lanes;
        if (cols - v * lanes >= lanes) {
          _mm256_storeu_ps(out, store ? acc[r][v] : _mm256_add_ps(_mm256_loadu_ps(out), acc[r][v]));
        } else {
          const __m256i mask = first_lanes(cols - v * lanes);
          _mm256_maskstore_ps(out, mask, store ? acc[r][v] : _mm256_add_ps(_mm256_maskload_ps(out, mask), acc[r][v]));
        }
      }
    }
  }

  template <bool Direct>
  [[gnu::target("avx2,fma")]] static void register_tile_any(int kc, const float* ap, std::ptrdiff_t lda, const float* bp,
                                                            float* c, std::ptrdiff_t ldc, int rows, int cols,
                                                            bool store) {
    if (cols > lanes) register_tile<2, Direct>(kc, ap, lda, bp, c, ldc, rows, cols, store);
    else register_tile<1, Direct>(kc, ap, lda, bp, c, ldc, rows, cols, store);
  }

  // A product of at most narrow_rows rows of C with a column-major B (C = X W^T: a dense layer's
  // forward at a batch of 8 or less) reads B in place: packing it would be a pass over all of W
  // costing more than the product's arithmetic at such M (cpu/packed_gemm.hpp: narrow_gemm).
  static constexpr int narrow_rows = lanes;

  // Packs rows [r0, r0 + rows) (rows <= 8) and depth [k0, k0 + kc) of A as kc vectors of 8 lanes:
  // out[kk 8 + i] = A(r0 + i, k0 + kk), lanes past `rows` zero.
  template <Layout LA>
  [[gnu::target("avx2,fma")]] static void pack_a_lanes(const float* a, std::ptrdiff_t lda, int r0, int rows, int k0,
                                                       int kc, float* out) {
    for (int kk = 0; kk < kc; ++kk) {
      for (int i = 0; i < lanes; ++i) {
        const std::ptrdiff_t row = r0 + i, depth = k0 + kk;
        out[kk * lanes + i] = i >= rows ? 0.0f : LA == Layout::row_major ? a[row * lda + depth] : a[depth * lda + row];
      }
    }
  }

  // C[0..rows, c0..c1) (+)= one K block of A (pack_a_lanes) times B's columns c0..c1, B(k, j) at
  // b[j ldb + k] from the block's first depth. acc[t] holds C(0..7, j + t): it sums
  // fma(A(r, k), B(k, j), acc) in k order, register_tile's arithmetic, so the same bits as the
  // packed path; an 8 x 8 transpose turns it into rows of C, stored as register_tile stores.
  [[gnu::target("avx2,fma")]] static void narrow_block(int kc, const float* packed_a, const float* b, std::ptrdiff_t ldb,
                                                       float* c, std::ptrdiff_t ldc, int rows, int c0, int c1,
                                                       bool store) {
    for (int j = c0; j < c1; j += lanes) {
      const int width = std::min(lanes, c1 - j);
      const float* column[lanes];
ETNN_UNROLL(8)
      for (int t = 0; t < lanes; ++t) column[t] = b + static_cast<std::ptrdiff_t>(t < width ? j + t : j) * ldb;
      __m256 acc[lanes];
ETNN_UNROLL(8)
      for (int t = 0; t < lanes; ++t) acc[t] = _mm256_setzero_ps();
      for (int kk = 0; kk < kc; ++kk) {
        const __m256 av = _mm256_loadu_ps(packed_a + kk * lanes);
ETNN_UNROLL(8)
        for (int t = 0; t < lanes; ++t) acc[t] = _mm256_fmadd_ps(av, _mm256_broadcast_ss(column[t] + kk), acc[t]);
      }
      transpose8(acc);  // acc[r]: C(r, j .. j + 7)
      const __m256i mask = first_lanes(width);
      for (int r = 0; r < rows; ++r) {
        float* out = c + r * ldc + j;
        if (width == lanes) {
          _mm256_storeu_ps(out, store ? acc[r] : _mm256_add_ps(_mm256_loadu_ps(out), acc[r]));
        } else {
          _mm256_maskstore_ps(out, mask, store ? acc[r] : _mm256_add_ps(_mm256_maskload_ps(out, mask), acc[r]));
        }
      }
    }
  }
};

}  // namespace etnn::cpu::packed

#endif  // ETNN_PACKED_GEMM
