#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// The packed GEMM's kernels for x86-64 CPUs with AVX-512 (cpu/packed_gemm.hpp runs them): 16
// floats a register, register tiles of mr x 64 (24 of the 32 vector registers accumulate).
// Compiled into every x86-64 build whatever its -march (target attributes), run where
// cpu/features.hpp finds AVX-512F.
//   pack_a:   rows of A into panels of mr rows, k-major, zero-padded
//   pack_b:   columns of B into panels of nr columns, k-major, zero-padded
//   register_tile_any: C[0..rows, 0..cols) (+)= one K block of A's panel times B's panel
#include <algorithm>
#include <array>
#include <cstddef>

#include "../core/config.hpp"
#include "features.hpp"
#include "layout.hpp"
#include "packing_storage.hpp"
#include "copied_panels.hpp"

#if ETNN_PACKED_GEMM
#include <immintrin.h>

namespace etnn::cpu::packed {

struct Avx512 {
  static constexpr int lanes = 16;          // floats per register
  static constexpr int vectors = 4;         // registers per row of a register tile
  static constexpr int nr = lanes * vectors;  // columns of a register tile

  // Mask of the first `count` lanes (all 16 for count >= 16, none for count <= 0).
  static __mmask16 first_lanes(int count) {
    if (count <= 0) return 0;
    return count >= lanes ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << count) - 1u);
  }

  // The mr x 16 block row[i][t] (row i, depth t) written depth-major: out[t mr + i] = row[i][t], the
  // first `count` of its 16 mr values. Output register j holds positions q = 16 j + l, that is
  // depth t = q / mr of row i = q % mr: one permute by t per row, merged under the lanes of row i.
  [[gnu::target("avx512f"), gnu::always_inline]] static void interleave_rows(const __m512 row[mr], float* out,
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
  [[gnu::target("avx512f")]] static void pack_a(const float* a, std::ptrdiff_t lda, int r0, int rows, int k0, int kc,
                                         float* out) {
    if constexpr (LA == Layout::col_major) {  // A(i, k) at a[k lda + i]: cpu/copied_panels.hpp
      pack_column_major_a<mr>(a, lda, r0, rows, k0, kc, out);
    } else {  // A(i, k) at a[i lda + k]: 16 depths of each row at a time, interleaved in registers
      for (int p = 0; p * mr < rows; ++p) {
        float* panel = out + static_cast<std::ptrdiff_t>(p) * mr * kc;
        const int valid = std::min(mr, rows - p * mr);
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
  [[gnu::target("avx512f"), gnu::always_inline]] static void transpose16(__m512 r[16]) {
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
  // holds B(k0 + kk, c0 + nr q + j) at q kc nr + kk nr + j, columns past the end as zeros up to
  // the end of their vector (whole vectors past it are left unwritten: no register tile reads them). Packed
  // panels are read with unit stride whatever B's leading dimension. A row-major B is copied by
  // groups of rows (cpu/copied_panels.hpp); a column-major B (B(k, j) at b[j ldb + k]) is
  // transposed 16 x 16 at a time in registers.
  template <Layout LB>
  [[gnu::target("avx512f")]] static void pack_b(const float* b, std::ptrdiff_t ldb, int k0, int kc, int c0, int cols,
                                         float* out) {
    if constexpr (LB == Layout::row_major) {
      pack_row_major_b<nr, lanes>(b, ldb, k0, kc, c0, cols, out);
    } else {
      for (int q = 0; q * nr < cols; ++q) {
        float* panel = out + static_cast<std::ptrdiff_t>(q) * kc * nr;
        for (int v = 0; v < nr / lanes; ++v) {
          const int first = q * nr + v * lanes;
          const int valid = std::min(lanes, cols - first);
          if (valid <= 0) break;  // vectors past the last column are never read (register_tile)
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
  [[gnu::target("avx512f")]] static void register_tile(int kc, const float* ap, std::ptrdiff_t lda, const float* bp,
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
  [[gnu::target("avx512f")]] static void register_tile_any(int kc, const float* ap, std::ptrdiff_t lda, const float* bp,
                                                           float* c, std::ptrdiff_t ldc, int rows, int cols, bool store) {
    switch ((cols + lanes - 1) / lanes) {
      case 1: register_tile<1, Direct>(kc, ap, lda, bp, c, ldc, rows, cols, store); break;
      case 2: register_tile<2, Direct>(kc, ap, lda, bp, c, ldc, rows, cols, store); break;
      case 3: register_tile<3, Direct>(kc, ap, lda, bp, c, ldc, rows, cols, store); break;
      default: register_tile<4, Direct>(kc, ap, lda, bp, c, ldc, rows, cols, store); break;
    }
  }

};

}  // namespace etnn::cpu::packed

#endif  // ETNN_PACKED_GEMM
