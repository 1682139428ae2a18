#pragma once
// Private to cuda/fused_mlp.hpp: the fused MLP's host driver: FusedMlp<Half, Act, Widths...>, its
// checks and its kernel launches.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../../core/error.hpp"
#include "../runtime.hpp"
#include "geometry.hpp"
#include "kernels.hpp"
#include "net.hpp"

namespace etnn::cuda {

namespace detail::fused_mlp {

// Lets Kernel use Bytes of dynamic shared memory (above the default 48 KiB). Asked once per kernel:
// etnn's work runs on the device its stream was made on (cuda::stream()), where the attribute
// stays set, so later launches (eager steps launch every step) make no call for it. Like the
// stream, it does not follow a later cudaSetDevice.
template <auto Kernel, std::size_t Bytes>
void allow_dynamic_smem() {
  static const bool allowed = [] {
    ETNN_CHECK_CUDA(runtime().cudaFuncSetAttribute(reinterpret_cast<const void*>(Kernel),
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   static_cast<int>(Bytes)));
    return true;
  }();
  (void)allowed;
}

// The major compute capability of etnn's device, asked once (see allow_dynamic_smem).
inline int device_major_capability() {
  static const int major = [] {
    int device = 0, value = 0;
    ETNN_CHECK_CUDA(runtime().cudaGetDevice(&device));
    ETNN_CHECK_CUDA(runtime().cudaDeviceGetAttribute(&value, cudaDevAttrComputeCapabilityMajor, device));
    return value;
  }();
  return major;
}

// One block per tile of tile_rows rows of the batch.
inline unsigned tile_blocks(int batch) { return static_cast<unsigned>(ceil_div(batch, tile_rows)); }

}  // namespace detail::fused_mlp

// Half: __nv_bfloat16 or __half. Act: the hidden layers' activation, fn::Relu, fn::Tanh or fn::Silu.
template <class Half, class Act, int... Widths>
struct FusedMlp {
  static_assert(std::is_same_v<Half, __nv_bfloat16> || std::is_same_v<Half, __half>);
  static_assert(expr::detail::fused_hidden<Act>, "the fused kernels' hidden activation is ReLU, tanh or SiLU");
  static_assert(sizeof...(Widths) >= 2, "ETNN_FUSED_MLP_WIDTH: a fused MLP needs an input and an output width");
  static_assert(fused_mlp_widths_ok<Widths...>, "ETNN_FUSED_MLP_WIDTH: every width must be 16, 32, 64 or 128");

 private:
  using Net = detail::fused_mlp::Net<Half, Act, Widths...>;
  using Buffers = typename Net::Buffers;

 public:
  static constexpr int layers = Net::layers;
  static constexpr std::size_t num_params = Net::num_params;

  // Bytes of `saved` at this batch: hidden activations A_1..A_{L-1} (Half, kept from forward to
  // backward; and f'(Z) beside them where Act' needs Z), then backward's scratch: dZ_0..dZ_{L-2}
  // (Half) and the per-chunk partial gradients.
  static std::size_t saved_bytes(int batch) {
    check_batch(batch);
    return Net::saved_layout(batch, nullptr).bytes;
  }

  // Training forward: x (batch, in) fp32 row-major -> y (batch, out) fp32 row-major; keeps the
  // hidden activations in `saved` (saved_bytes(batch) bytes, 256-byte aligned). One launch.
  static void forward(const float* params, const float* x, float* y, void* saved, int batch, cudaStream_t stream) {
    check_batch(batch);
    if (batch == 0) return;
    check_device_and_saved(saved);
    const Buffers buffers = Net::saved_layout(batch, saved).buffers;
    constexpr auto kernel = detail::fused_mlp::fused_mlp_forward_kernel<Net>;
    detail::fused_mlp::allow_dynamic_smem<kernel, Net::tile_smem_bytes>();
    launch("fused_mlp_forward_kernel", kernel,
           {detail::fused_mlp::tile_blocks(batch), detail::fused_mlp::threads, Net::tile_smem_bytes, stream}, params,
           x, y, buffers, batch);
  }

  // Backward after forward(params, x, ., saved, batch): dy (batch, out) fp32 = dL/dy.
  // ACCUMULATES (+=) dL/dparams into grads (params' layout); WRITES dL/dx (batch, in) fp32 to dx
  // unless it is null. `saved`'s scratch part is overwritten (its activations are not). Three
  // launches (two when L = 1 without dx).
  static void backward(const float* params, float* grads, const float* x, void* saved, const float* dy, int batch,
                       cudaStream_t stream, float* dx = nullptr) {
    check_batch(batch);
    if (batch == 0) return;
    check_device_and_saved(saved);
    const Buffers buffers = Net::saved_layout(batch, saved).buffers;
    if (layers >= 2 || dx != nullptr) {
      constexpr auto kernel = detail::fused_mlp::fused_mlp_chain_kernel<Net>;
      detail::fused_mlp::allow_dynamic_smem<kernel, Net::tile_smem_bytes>();
      launch("fused_mlp_chain_kernel", kernel,
             {detail::fused_mlp::tile_blocks(batch), detail::fused_mlp::threads, Net::tile_smem_bytes, stream},
             params, dy, buffers, dx, batch);
    }
    {
      constexpr auto kernel = detail::fused_mlp::fused_mlp_weight_grad_kernel<Net>;
      detail::fused_mlp::allow_dynamic_smem<kernel, Net::weight_grad_smem_bytes>();
      const dim3 grid(static_cast<unsigned>(buffers.chunks), static_cast<unsigned>(layers));
      launch("fused_mlp_weight_grad_kernel", kernel,
             {grid, detail::fused_mlp::threads, Net::weight_grad_smem_bytes, stream}, x, dy, buffers, batch);
    }
    {
      constexpr int blocks =
          static_cast<int>((num_params + detail::fused_mlp::threads - 1) / detail::fused_mlp::threads);
      launch("fused_mlp_reduce_kernel", detail::fused_mlp::fused_mlp_reduce_kernel<Net>,
             {blocks, detail::fused_mlp::threads, 0, stream}, grads, buffers.partial, buffers.chunks);
    }
  }

 private:
  static void check_batch(int batch) {
    if (batch < 0) throw Error("etnn fused_mlp: negative batch " + std::to_string(batch));
  }

  static void check_device_and_saved(const void* saved) {
    if (saved == nullptr || reinterpret_cast<std::uintptr_t>(saved) % detail::fused_mlp::region_align != 0)
      throw Error("etnn fused_mlp: `saved` must be a 256-byte aligned device buffer of saved_bytes(batch)");
    if (detail::fused_mlp::device_major_capability() < 8)
      throw DeviceError("etnn fused_mlp: its 16-bit tensor-core kernels need compute capability 8.0 or newer");
  }
};

}  // namespace etnn::cuda
