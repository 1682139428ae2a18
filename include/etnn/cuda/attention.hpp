#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// nn::multi_head_attention's core on the device: expr/attention.hpp's functors, one thread per
// query row (forward, Delta) or per (sample, head) (backward), with the host's signatures
// (cpu/attention.hpp).
#include <cstddef>

#include "../core/device.hpp"
#include "../expr/attention.hpp"
#include "executor.hpp"

namespace etnn {

template <int T, int D, int H, bool Causal, class S>
void attention_forward(Cuda device, const S* qkv, S* out, S* lse, std::size_t samples) {
  for_each_index(device, std::size_t{H} * T * samples, 4 * std::size_t{T} * D / H,
                 expr::AttentionForwardRows<T, D, H, Causal, S>{qkv, out, lse});
}

template <int T, int D, int H, bool Causal, class S>
void attention_backward(Cuda device, const S* qkv, const S* out, const S* dout, const S* lse, S* delta, S* dqkv,
                        std::size_t samples) {
  for_each_index(device, std::size_t{H} * T * samples, std::size_t{D} / H,
                 expr::AttentionDeltaRows<T, D, H, Causal, S>{out, dout, delta});
  for_each_index(device, std::size_t{H} * samples, 5 * std::size_t{T} * T * D / H,
                 expr::AttentionBackwardHeads<T, D, H, Causal, S>{qkv, dout, lse, delta, dqkv});
}

}  // namespace etnn
