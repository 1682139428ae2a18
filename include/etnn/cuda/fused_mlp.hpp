#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// Fully fused narrow MLP on 16-bit tensor cores, bf16 or fp16 (the tiny-cuda-nn idea).
//
//   y = W_{L-1} f(... f(W_0 x + b_0) ...) + b_{L-1}     widths {w_0 = in, w_1, ..., w_L = out}
//   f = one activation on every hidden layer, ReLU, tanh or SiLU (the CPU's fn::Relu, fn::Tanh,
//   fn::Silu: ReLU keeps NaN), identity on the output layer; every width in {16, 32, 64, 128}.
//
// Notation (0-based, layer l maps width w_l to w_{l+1}):
//   A_0 = x                           (batch, w_0)
//   Z_l = A_l W_l^T + b_l             A_l: (batch, w_l)  W_l: (w_{l+1}, w_l)  Z_l: (batch, w_{l+1})
//   A_{l+1} = f(Z_l)  for l < L-1,  y = Z_{L-1};  K_{l+1} = f'(Z_l) kept where f' needs Z (SiLU)
// Backward, with dZ_{L-1} = dy:
//   dW_l += dZ_l^T A_l                (w_{l+1}, batch) x (batch, w_l)
//   db_l += sum over rows of dZ_l
//   dZ_{l-1} = (dZ_l W_l) (.) f'(Z_{l-1})    for l >= 1, f' from A_l (ReLU: [A_l > 0], tanh:
//                                            1 - A_l^2) or K_l
//   dX = dZ_0 W_0                     (batch, w_0) fp32, when asked for (a trainable layer below)
//
// Kernels (256 threads = 8 warps per block; a block carries a tile of 128 batch rows and each
// warp owns 16 consecutive rows of it, so activations between layers stay warp-private):
//   forward:  fused_mlp_forward_kernel, one launch, one block per 128-row tile, all layers. The
//             tile's activations stay in shared memory as Half (overwritten layer by layer); each
//             layer's weights are converted fp32 -> Half into shared memory; bias and f are
//             applied in fp32 before rounding. Hidden activations A_1..A_{L-1} (and K) go to `saved`.
//   backward: 1. fused_mlp_chain_kernel (when L >= 2 or dX is asked for): one block per tile,
//                dZ_{L-1} = dy down to dZ_0 through all layers, tile-local; dZ_0..dZ_{L-2} go to
//                `saved` (Half); then dX from the tile's dZ_0 straight to its fp32 destination.
//             2. fused_mlp_weight_grad_kernel: grid (chunks, L); block (c, l) computes
//                dW_l and db_l over the rows of chunk c (a run of whole tiles) into its own slot of
//                a per-chunk partial buffer laid out like the parameters.
//             3. fused_mlp_reduce_kernel: grads[p] += sum over chunks of partial[c][p], chunks in
//                order. Every sum has a fixed order, so the result is the same on every run.
// Precision: Half operands (x, weights, activations, K, dZ), fp32 accumulation, fp32 bias and f; Half
// is __nv_bfloat16 (etnn::bf16 models) or __half (etnn::fp16, whose gradients the Trainer scales).
//
// `saved` (saved_bytes(batch) bytes, 256-byte aligned, e.g. from cudaMalloc) holds the hidden
// activations (and K) written by forward and, after them, the scratch backward writes (dZ, partials):
// backward leaves the activations untouched, so it may be called again with the same `saved`.
//
// The pieces, in cuda/fused_mlp/: geometry.hpp (widths, layouts, shared-memory sizes, `saved`'s
// layout, the chunk plan), tile_io.hpp (global -> shared copies, the fragment epilogue's helpers),
// net.hpp (Net, the layers' device code: the forward and the chain layers share one
// strip-times-weights product and differ in B's layout and their epilogues), kernels.hpp (the
// __global__ entries), host.hpp (FusedMlp: checks and launches) and padding.hpp (the copies around
// a network run at padded widths).
#include "fused_mlp/geometry.hpp"
#include "fused_mlp/host.hpp"
#include "fused_mlp/kernels.hpp"
#include "fused_mlp/net.hpp"
#include "fused_mlp/padding.hpp"
#include "fused_mlp/tile_io.hpp"
