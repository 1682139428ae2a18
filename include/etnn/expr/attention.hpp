#pragma once
// Private to expr/: include <etnn/expr/expr.hpp> or <etnn/etnn.hpp>.
// The math of nn::multi_head_attention's core as ETNN_HD functors, for a sequence (T, D) with H
// heads of d = D / H values, scale 1 / sqrt(d), and [Q | K | V] (B T, 3D) from the input
// projection:
//   S = scale Q_h K_h^T, masked (u > t) when Causal;  P = softmax_rows(S);  O_h = P V_h
//   L_t = m + log l, the row's log-sum-exp, kept for backward
// Backward, with Delta_t = dO_t . O_t:
//   P_tu = exp(scale q_t . k_u - L_t),  dS_tu = P_tu (dO_t . v_u - Delta_t)
//   dq_t = scale sum_u dS_tu k_u,  dk_u = scale sum_t dS_tu q_t,  dv_u = sum_t P_tu dO_t
// The device runs these one thread per call (cuda/attention.hpp); the host runs the same math as
// blocks of GEMMs (cpu/attention.hpp), and its tests run these functors too, against it.
#include <cmath>
#include <cstddef>
#include <limits>

#include "../core/config.hpp"
#include "../core/fast_math.hpp"
#include "../core/lane_sum.hpp"

namespace etnn::expr {


// The geometry every attention functor shares: query or key row i of the B H T rows is
// (sample b, head h, position t), and head h of position t of sample b reads its d values of
// Q, K and V at qkv + (b T + t) 3D + {0, D, 2D} + h d.
template <int T, int D, int H, bool Causal>
struct AttentionGeometry {
  static constexpr int d = D / H;
  static constexpr std::size_t row_values = 3 * std::size_t{D};
  struct Row {
    std::size_t position;  // b T + t: the row of x, y, O and [Q | K | V]
    int head;
    int t;
  };
  ETNN_HD static Row row(std::size_t i) {
    const std::size_t b = i / (std::size_t{H} * T);
    const int head = static_cast<int>(i / T % H);
    const int t = static_cast<int>(i % T);
    return {b * T + static_cast<std::size_t>(t), head, t};
  }
  // The keys query t sees: [0, key_end(t)).
  ETNN_HD static int key_end(int t) { return Causal ? t + 1 : T; }
  template <class S>
  ETNN_HD static S scale() {
    return S(1) / std::sqrt(S(d));
  }
  // a . b over one head's d values, in lanes (core/lane_sum.hpp): the same sum on every thread
  // count.
  template <class S>
  ETNN_HD static S dot(const S* a, const S* b) {
    return etnn::detail::lane_sum<d, S>([&](int j) { return a[j] * b[j]; });
  }
};

// O_t and L_t of query row i, over its keys in blocks of 16.
template <int T, int D, int H, bool Causal, class S>
struct AttentionForwardRows {
  using G = AttentionGeometry<T, D, H, Causal>;
  static constexpr int block = 16;
  const S* qkv;  // (B T, 3D)
  S* out;        // O: (B T, D)
  S* lse;        // L: (B H T), or null when nothing will run backward
  ETNN_HD void operator()(std::size_t i) const {
    const auto r = G::row(i);
    const S* sample = qkv + (r.position - static_cast<std::size_t>(r.t)) * G::row_values;
    const S* q = qkv + r.position * G::row_values + r.head * G::d;
    S acc[G::d] = {};
    S m = -std::numeric_limits<S>::infinity(), l = 0;
    const int keys = G::key_end(r.t);
    for (int u0 = 0; u0 < keys; u0 += block) {
      const int n = keys - u0 < block ? keys - u0 : block;
      S s[block];
      S block_max = -std::numeric_limits<S>::infinity();
      for (int k = 0; k < n; ++k) {
        s[k] = G::template scale<S>() * G::dot(q, sample + (u0 + k) * G::row_values + D + r.head * G::d);
        block_max = s[k] > block_max ? s[k] : block_max;
      }
      if (block_max > m) {  // rescale what was summed under the old maximum
        const S c = etnn::detail::fast_exp(m - block_max);
        l *= c;
        for (int j = 0; j < G::d; ++j) acc[j] *= c;
        m = block_max;
      }
      ETNN_SIMD
      for (int k = 0; k < n; ++k) s[k] = etnn::detail::fast_exp(s[k] - m);  // P_tu, unnormalised
      for (int k = 0; k < n; ++k) {
        const S* v = sample + (u0 + k) * G::row_values + 2 * D + r.head * G::d;
        l += s[k];
        for (int j = 0; j < G::d; ++j) acc[j] += s[k] * v[j];
      }
    }
    S* o = out + r.position * D + r.head * G::d;
    for (int j = 0; j < G::d; ++j) o[j] = acc[j] / l;
    if (lse != nullptr) lse[i] = m + std::log(l);
  }
};

// Delta_t = dO_t . O_t of row i.
template <int T, int D, int H, bool Causal, class S>
struct AttentionDeltaRows {
  using G = AttentionGeometry<T, D, H, Causal>;
  const S* out;
  const S* dout;
  S* delta;
  ETNN_HD void operator()(std::size_t i) const {
    const auto r = G::row(i);
    const std::size_t at = r.position * D + r.head * G::d;
    delta[i] = G::dot(dout + at, out + at);
  }
};

// dq, dk and dv of head h of sample b, call i = b H + h: its queries t in order, each over the
// keys u it sees, so that every P_tu and dS_tu is computed once; the head's dk and dv rows (T of
// each, d values) stay in cache while they accumulate.
template <int T, int D, int H, bool Causal, class S>
struct AttentionBackwardHeads {
  using G = AttentionGeometry<T, D, H, Causal>;
  static constexpr int block = 16;
  const S* qkv;
  const S* dout;
  const S* lse;
  const S* delta;
  S* dqkv;
  ETNN_HD void operator()(std::size_t i) const {
    const std::size_t first_position = i / H * T;  // b T
    const int head = static_cast<int>(i % H);
    const S* sample = qkv + first_position * G::row_values + head * G::d;  // q of position 0 of the head
    S* dsample = dqkv + first_position * G::row_values + head * G::d;
    for (int u = 0; u < T; ++u)
      for (int j = 0; j < G::d; ++j) dsample[u * G::row_values + D + j] = dsample[u * G::row_values + 2 * D + j] = S(0);
    const S scale = G::template scale<S>();
    for (int t = 0; t < T; ++t) {
      const std::size_t r = i * T + static_cast<std::size_t>(t);  // the row of L and Delta
      const S* q = sample + t * G::row_values;
      const S* dout_t = dout + (first_position + static_cast<std::size_t>(t)) * D + head * G::d;
      S dq[G::d] = {};
      const int keys = G::key_end(t);
      for (int u0 = 0; u0 < keys; u0 += block) {  // P and dS of a block of keys, then their sums
        const int n = keys - u0 < block ? keys - u0 : block;
        S p[block], ds[block];
        for (int k = 0; k < n; ++k) {
          const S* key = sample + (u0 + k) * G::row_values + D;
          p[k] = scale * G::dot(q, key) - lse[r];
          ds[k] = G::dot(dout_t, key + D) - delta[r];
        }
        ETNN_SIMD
        for (int k = 0; k < n; ++k) {
          p[k] = etnn::detail::fast_exp(p[k]);
          ds[k] *= p[k];
        }
        for (int k = 0; k < n; ++k) {
          const S* key = sample + (u0 + k) * G::row_values + D;
          S* dk = dsample + (u0 + k) * G::row_values + D;
          S* dv = dk + D;
          ETNN_SIMD
          for (int j = 0; j < G::d; ++j) {
            dq[j] += ds[k] * key[j];
            dk[j] += ds[k] * q[j];
            dv[j] += p[k] * dout_t[j];
          }
        }
      }
      for (int j = 0; j < G::d; ++j) dsample[t * G::row_values + j] = scale * dq[j];
    }
    for (int u = 0; u < T; ++u)
      for (int j = 0; j < G::d; ++j) dsample[u * G::row_values + D + j] *= scale;
  }
};

}  // namespace etnn::expr
