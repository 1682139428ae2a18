#pragma once
// Private to cuda/fused_mlp.hpp: the fused MLP's __global__ kernels: three thin entries into Net's
// device code (forward, dZ chain, weight gradients) and the reduction of the per-chunk partials.
#include <cuda_runtime.h>

#include <cstddef>

#include "../runtime.hpp"
#include "geometry.hpp"
#include "net.hpp"

namespace etnn::cuda::detail::fused_mlp {

// bf16 WMMA needs sm_80 (fp16 WMMA sm_70, but one gate serves both formats, and etnn builds for
// sm_80 and sm_90); for older targets the bodies compile to a trap (the launchers refuse
// devices below compute capability 8.0 before launching).
// The body of the three tile kernels: body(the block's dynamic shared memory), behind that gate.
template <class Body>
__device__ __forceinline__ void with_shared_memory_on_sm80(Body&& body) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) unsigned char fused_mlp_smem[];
  body(fused_mlp_smem);
#else
  __trap();
#endif
}

template <class N>
__global__ void __launch_bounds__(threads)
    fused_mlp_forward_kernel(const float* params, const float* x, float* y, typename N::Buffers saved, int batch) {
  with_shared_memory_on_sm80([&](unsigned char* smem) { N::forward_tile(smem, params, x, y, saved, batch); });
}

template <class N>
__global__ void __launch_bounds__(threads)
    fused_mlp_chain_kernel(const float* params, const float* dy, typename N::Buffers saved, float* dx, int batch) {
  with_shared_memory_on_sm80([&](unsigned char* smem) { N::chain_tile(smem, params, dy, saved, dx, batch); });
}

// Grid (chunks, layers).
template <class N>
__global__ void __launch_bounds__(threads)
    fused_mlp_weight_grad_kernel(const float* x, const float* dy, typename N::Buffers saved, int batch) {
  with_shared_memory_on_sm80([&](unsigned char* smem) {
    N::template weight_grad_dispatch<0>(static_cast<int>(blockIdx.y), smem, x, dy, saved, batch);
  });
}

// grads[p] += sum over c in 0..chunks-1 of partial[c * num_params + p], in that order, for every
// p that holds a parameter (partial is not written between tensors).
template <class N>
__global__ void __launch_bounds__(threads) fused_mlp_reduce_kernel(float* grads, const float* partial, int chunks) {
  for (const std::size_t p : grid_stride(N::num_params)) {
    if (N::layout::place(p).layer < 0) continue;
    float total = 0.0f;
    for (int c = 0; c < chunks; ++c) total += partial[static_cast<std::size_t>(c) * N::num_params + p];
    grads[p] += total;
  }
}

}  // namespace etnn::cuda::detail::fused_mlp
