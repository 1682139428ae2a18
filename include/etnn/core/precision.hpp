#pragma once
// Model scalar types. float and double compute in their own precision. etnn::bf16 is mixed
// precision, as torch.autocast(dtype=torch.bfloat16) with fp32 master weights: parameters,
// gradients, optimizer state, inputs and outputs stay fp32, and the network's matrix products run
// in bfloat16 with fp32 accumulation on tensor cores (CUDA only). A narrow MLP (linear and relu,
// widths up to 128) runs as the fully fused kernels, keeping its activations in bf16 on chip;
// any other network runs layer by layer, its linear layers' products through cuBLASLt from bf16
// copies of their operands, everything else in fp32. etnn::bf16_unfused is etnn::bf16 on the
// per-layer path even for a network the fused kernels take (to compare the two).
//   etnn::Model<Net, etnn::bf16, etnn::Cuda> model(0);   // model.parameters() is float*
#include <type_traits>

namespace etnn {

struct bf16 {};
struct bf16_unfused {};

template <class Scalar>
inline constexpr bool mixed_precision = std::is_same_v<Scalar, bf16> || std::is_same_v<Scalar, bf16_unfused>;

// The type a model keeps its parameters (and takes its data) in.
template <class Scalar>
using master_t = std::conditional_t<mixed_precision<Scalar>, float, Scalar>;

}  // namespace etnn
