#pragma once
// Private to backend/: include <etnn/backend/backend.hpp> or <etnn/etnn.hpp>.
// The fully fused narrow-MLP kernels for the program that runs them (nn/fused_mlp_program.hpp):
//   HalfOf<Scalar>::type             the 16-bit operand type of a mixed-precision scalar type
//                                    (__half for etnn::fp16, __nv_bfloat16 for etnn::bf16)
//   FusedMlpKernels<Half, Act, W...>::type  the kernels at a network's true widths W, Act between
//                                    its layers (cuda::PaddedFusedMlp)
// Only an nvcc build has them; a host build declares both and defines neither, so a program that
// names them compiles there as long as nothing instantiates it (etnn::device_compiled<Cuda> is
// false, and nn never chooses the fused program).
// The dispatch header of this op family (dlib's tensor_tools idea): it includes the CUDA kernels
// only under nvcc, so that nn never names a backend itself.
#include <type_traits>

#include "../core/precision.hpp"
#if defined(__CUDACC__)
#include "../cuda/fused_mlp.hpp"
#endif

namespace etnn::backend {

template <class Scalar>
struct HalfOf;
template <class Half, class Act, int... Widths>
struct FusedMlpKernels;

#if defined(__CUDACC__)
template <class Scalar>
struct HalfOf {
  using type = std::conditional_t<products_of<Scalar> == Products::fp16, __half, __nv_bfloat16>;
};
template <class Half, class Act, int... Widths>
struct FusedMlpKernels {
  using type = cuda::PaddedFusedMlp<Half, Act, Widths...>;
};
#endif

}  // namespace etnn::backend
