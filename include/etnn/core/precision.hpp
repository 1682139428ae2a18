#pragma once
// Model scalar types. float and double compute in their own precision. etnn::bf16 is mixed
// precision, as torch.autocast(dtype=torch.bfloat16) with fp32 master weights: parameters,
// gradients, optimizer state, inputs and outputs stay fp32, and the network computes in bfloat16
// with fp32 accumulation on tensor cores (CUDA only).
//   etnn::Model<Net, etnn::bf16, etnn::Cuda> model(0);   // model.parameters() is float*
#include <type_traits>

namespace etnn {

struct bf16 {};

// The type a model keeps its parameters (and takes its data) in.
template <class Scalar>
using master_t = std::conditional_t<std::is_same_v<Scalar, bf16>, float, Scalar>;

}  // namespace etnn
