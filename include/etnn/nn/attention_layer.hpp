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
//     S = scale Q_h K_h^T, masked (u > t) when Causal (T, T)
//     P = softmax_rows(S),  O_h = P V_h              (T, d)
//     L_t = the row's log-sum-exp, kept for backward
//   y = O W_out^T + b_out                            (T, D)    O: the heads side by side
// Backward, with dO from the output projection's backward and Delta_t = dO_t . O_t:
//   P_tu = exp(scale q_t . k_u - L_t),  dS_tu = P_tu (dO_t . v_u - Delta_t)
//   dq_t = scale sum_u dS_tu k_u,  dk_u = scale sum_t dS_tu q_t,  dv_u = sum_t P_tu dO_t
// The core between the projections is backend/attention.hpp's attention_forward and
// attention_backward: on the CPU blocks of query rows as GEMMs (cpu/attention.hpp), on the device
// expr/attention.hpp's functors (an online softmax per query row, as FlashAttention). Neither
// stores a B H T T array, and neither's sums depend on the thread count. Both projections are
// DenseLayers over the B T positions (the same products, bias epilogues and gradient modes as
// nn::linear).
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "../core/config.hpp"
#include "../backend/attention.hpp"
#include "checks.hpp"
#include "dense_layer.hpp"
#include "init.hpp"
#include "layer.hpp"

namespace etnn::nn {

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
  // Per sample, each region from an aligned offset: [Q | K | V] (3 T D), O (T D), L (H T).
  static constexpr std::size_t qkv_values = aligned_values(3 * sequence);
  static constexpr std::size_t out_values = aligned_values(sequence);
  // Training keeps [Q | K | V], O and L.
  static constexpr std::size_t saved_per_sample = qkv_values + out_values + rows;
  static constexpr bool output_aliases_input = false;
  static constexpr bool backward_in_place = false;
  static constexpr bool overwrites_gradients = true;  // both projections honour pass.gradients
  static constexpr bool cuda_kernels = true;  // the row and head functors and the DenseLayers on the device

  // Inference keeps [Q | K | V] and O here instead; backward, dO, d[Q | K | V] and Delta.
  static constexpr std::size_t scratch_values(int batch) { return static_cast<std::size_t>(batch) * saved_per_sample; }

  template <class T>
  static void init(T* p, Rng& rng) {
    const double xavier = std::sqrt(6.0 / (w + 3 * w));  // fan_in D, fan_out 3D
    for (std::size_t i = 0; i < params[0].numel(); ++i) p[i] = static_cast<T>(rng.uniform(-xavier, xavier));
    std::fill_n(p + params[1].offset, params[1].numel(), T(0));
    init_fan_in_uniform(p + out_offset, params[2].numel(), w, rng);
    std::fill_n(p + params[3].offset, params[3].numel(), T(0));
  }

  template <class T, class Device>
  static void forward(Device device, const Pass<T>& pass, const T* p, const T* x, T* y, T* saved, int batch) {
    const auto samples = static_cast<std::size_t>(batch);
    T* qkv = saved != nullptr ? saved : pass.scratch;
    T* out = qkv + qkv_values * samples;
    T* lse = saved != nullptr ? out + out_values * samples : nullptr;
    InProjection::forward(device, pass, p, x, qkv, static_cast<T*>(nullptr), batch);
    attention_forward<length, width, Heads, Causal>(device, static_cast<const T*>(qkv), out, lse, samples);
    OutProjection::forward(device, pass, p + out_offset, out, y, static_cast<T*>(nullptr), batch);
  }

  template <class T, class Device>
  static void backward(Device device, const Pass<T>& pass, const T* p, T* g, const T* x, const T* y, const T* saved,
                       T* dy, T* dx, int batch) {
    const auto samples = static_cast<std::size_t>(batch);
    const T* qkv = saved;
    const T* out = qkv + qkv_values * samples;
    const T* lse = out + out_values * samples;
    T* dout = pass.scratch;
    T* dqkv = dout + out_values * samples;
    T* delta = dqkv + qkv_values * samples;
    OutProjection::backward(device, pass, p + out_offset, g + out_offset, out, y, static_cast<const T*>(nullptr), dy,
                            dout, batch);
    attention_backward<length, width, Heads, Causal>(device, qkv, out, static_cast<const T*>(dout), lse, delta, dqkv,
                                                     samples);
    InProjection::backward(device, pass, p, g, x, qkv, static_cast<const T*>(nullptr), dqkv, dx, batch);
  }
};

}  // namespace etnn::nn
