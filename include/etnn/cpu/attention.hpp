#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// nn::multi_head_attention's core on the CPU: attention_forward and attention_backward, the math
// of expr/attention.hpp computed as GEMMs. One call per (sample, head), which threads split, runs
// over blocks of `query_block` query rows t0 .. t0 + n; each block sees keys [0, n_k) (n_k =
// t0 + n when causal: the block's last query sees that far, the keys past it are never read):
//   forward   S = Q_blk K^T (n, n_k);  P = softmax_rows(scale S) under the mask, L = log-sum-exp
//             O_blk = P V                                       (n, d)
//   backward  S again and dP = dO_blk V^T (n, n_k);  P = exp(scale S - L) under the mask
//             dS' = scale P (.) (dP - Delta),  Delta_t = dO_t . O_t
//             dQ_blk = dS' K,  dK += dS'^T Q_blk,  dV += P^T dO_blk   (d columns each)
// Q, K, V and their gradients are read and written in place in the (B T, 3D) rows, O and dO in
// the (B T, D) rows, through the GEMMs' leading dimensions. Only a block's n x n_k scores (two
// such in backward) exist, in the thread's scratch: never B H T T. Every sum runs in an order
// that depends on T and D alone (the blocks in order, each GEMM single-threaded), so results do
// not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "../core/device.hpp"
#include "../core/fast_math.hpp"
#include "../expr/attention.hpp"
#include "gemm.hpp"
#include "parallel.hpp"
#include "thread_scratch.hpp"

namespace etnn {

namespace cpu::detail {

inline constexpr int attention_query_block = 48;  // 8 of the packed GEMM's 6-row register tiles

// The extent a row's loops over its `keys` scores run to: keys rounded up to 16 (a whole number
// of vectors), at most the row's n_k scores. The keys past a row's end are masked inside the
// loops (no exponential of theirs is kept), which then have no scalar remainder: with a causal
// mask every row ends somewhere else, and remainders of up to 15 scalar exponentials were most of
// the softmax's time.
constexpr int vector_span(int keys, int n_k) { return std::min(n_k, (keys + 15) / 16 * 16); }

// One (sample, head) call's operands: head h of sample b at rows b T .. b T + T.
template <int T, int D, int H, bool Causal, class S>
struct AttentionHead {
  using G = expr::AttentionGeometry<T, D, H, Causal>;
  static constexpr int d = G::d, qkv_ld = 3 * D;
  const S* q;  // q_t at q + t qkv_ld; k_u and v_u at q + D, q + 2D
  std::size_t first_row;  // (b H + h) T: head row t's L and Delta at first_row + t
  std::size_t first_out;  // b T D + h d: O_t and dO_t at first_out + t D
  AttentionHead(const S* qkv, std::size_t call)
      : q(qkv + call / H * T * qkv_ld + call % H * d), first_row(call * T), first_out(call / H * T * D + call % H * d) {}
  const S* k() const { return q + D; }
  const S* v() const { return q + 2 * D; }
  // Keys [0, key_count) of the block of queries [t0, t0 + n).
  static int key_count(int t0, int n) { return Causal ? t0 + n : T; }
  // scores (n, n_k) = Q_blk B^T for B = K or V (rows at qkv_ld) against rows (at ld) from t0.
  static void scores(const S* rows, int ld, const S* keys, int n, int n_k, S* out) {
    cpu::gemm_serial<Layout::row_major, Layout::col_major>(Accumulate::no, n, n_k, d, rows, ld, keys, qkv_ld, out, n_k);
  }
};

}  // namespace cpu::detail

// O (B T, D): each head's d columns; L (B H T) when not null.
template <int T, int D, int H, bool Causal, class S>
void attention_forward(Cpu, const S* qkv, S* out, S* lse, std::size_t samples) {
  using Head = cpu::detail::AttentionHead<T, D, H, Causal, S>;
  constexpr int block = cpu::detail::attention_query_block;
  const S scale = Head::G::template scale<S>();
  // scale by value: a reference would be reloaded after every store to the scores
  cpu::parallel_chunks(samples * H, 1, 2 * std::size_t{T} * T * Head::d, [&, scale](std::size_t begin, std::size_t end) {
    S* p = cpu::thread_scratch<S>(std::size_t{block} * T);
    for (std::size_t call = begin; call < end; ++call) {
      const Head head(qkv, call);
      for (int t0 = 0; t0 < T; t0 += block) {
        const int n = std::min(block, T - t0), n_k = Head::key_count(t0, n);
        Head::scores(head.q + t0 * Head::qkv_ld, Head::qkv_ld, head.k(), n, n_k, p);
        for (int r = 0; r < n; ++r) {  // row t's softmax over its keys; zeros past them
          S* row = p + r * n_k;
          const int keys = Head::G::key_end(t0 + r), span = cpu::detail::vector_span(keys, n_k);
          S m = -std::numeric_limits<S>::infinity();  // the row's largest score, scaled (scale > 0)
          ETNN_SIMD_REDUCTION(max, m)
          for (int u = 0; u < span; ++u) m = u < keys && row[u] > m ? row[u] : m;
          m *= scale;
          ETNN_SIMD
          for (int u = 0; u < span; ++u) row[u] = u < keys ? etnn::detail::fast_exp(scale * row[u] - m) : S(0);
          S l = 0;
          ETNN_SIMD_REDUCTION(+, l)
          for (int u = 0; u < span; ++u) l += row[u];
          const S inv_l = S(1) / l;
          ETNN_SIMD
          for (int u = 0; u < span; ++u) row[u] *= inv_l;
          std::fill(row + span, row + n_k, S(0));
          if (lse != nullptr) lse[head.first_row + t0 + r] = m + std::log(l);
        }
        cpu::gemm_serial<cpu::Layout::row_major, cpu::Layout::row_major>(
            cpu::Accumulate::no, n, Head::d, n_k, p, n_k, head.v(), Head::qkv_ld, out + head.first_out + t0 * D, D);
      }
    }
  });
}

// d[Q | K | V] (B T, 3D) from dO (B T, D), with Q, K, V, O and L of forward. `delta` is the
// device's scratch; the host computes Delta as it goes.
template <int T, int D, int H, bool Causal, class S>
void attention_backward(Cpu, const S* qkv, const S* out, const S* dout, const S* lse, S* /*delta*/, S* dqkv,
                        std::size_t samples) {
  using Head = cpu::detail::AttentionHead<T, D, H, Causal, S>;
  constexpr int block = cpu::detail::attention_query_block, d = Head::d, ld = Head::qkv_ld;
  const S scale = Head::G::template scale<S>();
  cpu::parallel_chunks(samples * H, 1, 5 * std::size_t{T} * T * d, [&, scale](std::size_t begin, std::size_t end) {
    S* p = cpu::thread_scratch<S>(2 * std::size_t{block} * T);
    S* ds = p + std::size_t{block} * T;
    for (std::size_t call = begin; call < end; ++call) {
      const Head head(qkv, call);
      S* dq = dqkv + (head.q - qkv);
      S* dk = dq + D;
      S* dv = dq + 2 * D;
      for (int u = 0; u < T; ++u) std::fill_n(dk + u * ld, d, S(0)), std::fill_n(dv + u * ld, d, S(0));
      for (int t0 = 0; t0 < T; t0 += block) {
        const int n = std::min(block, T - t0), n_k = Head::key_count(t0, n);
        const S* dout_block = dout + head.first_out + t0 * D;
        Head::scores(head.q + t0 * ld, ld, head.k(), n, n_k, p);
        Head::scores(dout_block, D, head.v(), n, n_k, ds);
        for (int r = 0; r < n; ++r) {
          S* p_row = p + r * n_k;
          S* ds_row = ds + r * n_k;
          const int keys = Head::G::key_end(t0 + r), span = cpu::detail::vector_span(keys, n_k);
          const S log_sum = lse[head.first_row + t0 + r];
          const S delta = Head::G::dot(dout_block + r * D, out + head.first_out + (t0 + r) * D);
          ETNN_SIMD
          for (int u = 0; u < span; ++u) {
            const S p_u = u < keys ? etnn::detail::fast_exp(scale * p_row[u] - log_sum) : S(0);
            p_row[u] = p_u;
            ds_row[u] = scale * p_u * (ds_row[u] - delta);
          }
          std::fill(p_row + span, p_row + n_k, S(0));
          std::fill(ds_row + span, ds_row + n_k, S(0));
        }
        cpu::gemm_serial<cpu::Layout::row_major, cpu::Layout::row_major>(cpu::Accumulate::no, n, d, n_k, ds, n_k,
                                                                         head.k(), ld, dq + t0 * ld, ld);
        cpu::gemm_serial<cpu::Layout::col_major, cpu::Layout::row_major>(cpu::Accumulate::yes, n_k, d, n, ds, n_k,
                                                                         head.q + t0 * ld, ld, dk, ld);
        cpu::gemm_serial<cpu::Layout::col_major, cpu::Layout::row_major>(cpu::Accumulate::yes, n_k, d, n, p, n_k,
                                                                         dout_block, D, dv, ld);
      }
    }
  });
}

}  // namespace etnn
