#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// nn::multi_head_attention<H, Causal> bound to a sequence (T, D): PyTorch's
// nn.MultiheadAttention(D, H, batch_first=True) used as self-attention, attn(x, x, x) with
// attn_mask = the causal mask when Causal, with its parameters, names and initialisation:
//   in_proj_weight (3D, D) xavier-uniform, in_proj_bias (3D) = 0,
//   out_proj.weight (D, D) U(+-1/sqrt(D)), out_proj.bias (D) = 0.
//
// Forward, per sample, with d = D / H values per head and scale 1 / sqrt(d):
//   [Q | K | V] = x W_in^T + b_in                    (T, 3D)   one GEMM over B T rows
//   for each head h (its d columns of Q, K, V):
//     S = scale Q_h K_h^T, masked (u > t) when Causal (T, T)   never stored: each query row runs
//     P = softmax_rows(S)                                       over its keys in blocks, keeping a
//     O_h = P V_h                                     (T, d)    running max m, sum l and O
//     L_t = m + log l  (the row's log-sum-exp, kept for backward)  (online softmax, as FlashAttention)
//   y = O W_out^T + b_out                            (T, D)    O: the heads side by side
// Backward, with dO from the output projection's backward and Delta_t = dO_t . O_t:
//   P_tu = exp(scale q_t . k_u - L_t),  dS_tu = P_tu (dO_t . v_u - Delta_t)
//   dq_t = scale sum_u dS_tu k_u,  dk_u = scale sum_t dS_tu q_t,  dv_u = sum_t P_tu dO_t
// one call per (sample, head), recomputing P_tu from L as it goes. Every call writes only its own
// head's columns of d[Q | K | V], in a fixed order, so the sums do not depend on the thread count,
// and no B H T T array exists in either direction. Both projections are DenseLayers over
// the B T positions (the same products, bias epilogues and gradient modes as nn::linear).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "../core/config.hpp"
#include "../core/fast_math.hpp"
#include "../backend/executor.hpp"
#include "checks.hpp"
#include "dense_layer.hpp"
#include "init.hpp"
#include "layer.hpp"

namespace etnn::nn {

namespace detail {

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
  // a . b over one head's d values, in `lanes` partial sums (one vector register's worth), so
  // that the compiler vectorises it without reassociating: the same sum on every device and
  // thread count.
  static constexpr int lanes = d % 8 == 0 ? 8 : d % 4 == 0 ? 4 : 1;
  template <class S>
  ETNN_HD static S dot(const S* a, const S* b) {
    S part[lanes] = {};
    for (int j = 0; j < d; j += lanes) {
      ETNN_SIMD
      for (int l = 0; l < lanes; ++l) part[l] += a[j + l] * b[j + l];
    }
    S sum = 0;
    for (int l = 0; l < lanes; ++l) sum += part[l];
    return sum;
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

}  // namespace detail

template <ShapeType In, int Heads, bool Causal, int Index>
struct MultiHeadAttentionLayer {
  static_assert(check::sequence_input<In, TokenShape<In>>());
  static constexpr int length = dim_or_one<In>(0);
  static constexpr int width = dim_or_one<In>(1);
  static_assert(check::attention_heads<width, Heads>());
  using InProjection = DenseLayer<In, 3 * width, fn::Identity, Index>;   // x -> [Q | K | V]
  using OutProjection = DenseLayer<In, width, fn::Identity, Index>;      // O -> y
  static constexpr std::size_t out_offset = InProjection::num_params;
  static constexpr std::size_t rows = std::size_t{Heads} * length;  // query rows per sample
  static constexpr std::size_t sequence = std::size_t{length} * width;

  using in_shape = In;
  using out_shape = In;
  static constexpr int module_index = Index;
  static constexpr std::size_t num_params = InProjection::num_params + OutProjection::num_params;
  static constexpr std::size_t w = static_cast<std::size_t>(width);
  // The projections' weight and bias, under nn.MultiheadAttention's names.
  static constexpr std::array<ParamInfo, 4> params{{
      {"in_proj_weight", 2, {3 * width, width, 0, 0}, 0},
      {"in_proj_bias", 1, {3 * width, 0, 0, 0}, InProjection::params[1].offset},
      {"out_proj.weight", 2, {width, width, 0, 0}, out_offset},
      {"out_proj.bias", 1, {width, 0, 0, 0}, out_offset + OutProjection::params[1].offset},
  }};
  // Training keeps [Q | K | V] (3 T D), O (T D) and L (H T) per sample.
  static constexpr std::size_t saved_per_sample = 4 * sequence + rows;
  static constexpr bool output_aliases_input = false;
  static constexpr bool backward_in_place = false;
  static constexpr bool overwrites_gradients = true;  // both projections honour pass.gradients
  static constexpr bool cuda_kernels = true;  // the row and head functors and the DenseLayers on the device

  // Inference keeps [Q | K | V] and O here instead; backward, dO, d[Q | K | V] and Delta.
  static constexpr std::size_t scratch_values(int batch) {
    return static_cast<std::size_t>(batch) * (4 * sequence + rows);
  }

  template <class T>
  static void init(T* p, Rng& rng) {
    const double xavier = std::sqrt(6.0 / (w + 3 * w));  // fan_in D, fan_out 3D
    for (std::size_t i = 0; i < params[1].offset; ++i) p[i] = static_cast<T>(rng.uniform(-xavier, xavier));
    std::fill_n(p + params[1].offset, params[1].numel(), T(0));
    init_fan_in_uniform(p + out_offset, params[2].numel(), w, rng);
    std::fill_n(p + params[3].offset, params[3].numel(), T(0));
  }

  template <class T, class Device>
  static void forward(Device device, const Pass<T>& pass, const T* p, const T* x, T* y, T* saved, int batch) {
    const auto samples = static_cast<std::size_t>(batch);
    T* qkv = saved != nullptr ? saved : pass.scratch;
    T* out = qkv + 3 * sequence * samples;
    T* lse = saved != nullptr ? out + sequence * samples : nullptr;
    InProjection::forward(device, pass, p, x, qkv, static_cast<T*>(nullptr), batch);
    for_each_index(device, rows * samples, 4 * std::size_t{length} * width / Heads,
                   detail::AttentionForwardRows<length, width, Heads, Causal, T>{qkv, out, lse});
    OutProjection::forward(device, pass, p + out_offset, out, y, static_cast<T*>(nullptr), batch);
  }

  template <class T, class Device>
  static void backward(Device device, const Pass<T>& pass, const T* p, T* g, const T* x, const T* y, const T* saved,
                       T* dy, T* dx, int batch) {
    const auto samples = static_cast<std::size_t>(batch);
    const T* qkv = saved;
    const T* out = qkv + 3 * sequence * samples;
    const T* lse = out + sequence * samples;
    T* dout = pass.scratch;
    T* dqkv = dout + sequence * samples;
    T* delta = dqkv + 3 * sequence * samples;
    OutProjection::backward(device, pass, p + out_offset, g + out_offset, out, y, static_cast<const T*>(nullptr), dy,
                            dout, batch);
    for_each_index(device, rows * samples, std::size_t{width} / Heads,
                   detail::AttentionDeltaRows<length, width, Heads, Causal, T>{out, dout, delta});
    for_each_index(device, std::size_t{Heads} * samples, 5 * std::size_t{length} * length * width / Heads,
                   detail::AttentionBackwardHeads<length, width, Heads, Causal, T>{qkv, dout, lse, delta, dqkv});
    InProjection::backward(device, pass, p, g, x, qkv, static_cast<const T*>(nullptr), dqkv, dx, batch);
  }
};

}  // namespace etnn::nn
