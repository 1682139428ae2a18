#pragma once
// Private to core/: include <etnn/core/core.hpp> or <etnn/etnn.hpp>.
// Model scalar types. float and double compute in their own precision. etnn::bf16 and etnn::fp16
// are mixed precision, as torch.autocast with fp32 master weights: parameters, gradients,
// optimizer state, inputs and outputs stay fp32, and the network's matrix products run in the
// 16-bit format with fp32 accumulation on tensor cores (CUDA only). A narrow MLP (linear and relu,
// widths up to 128) runs as the fully fused kernels, keeping its activations in the 16-bit format
// on chip; any other network runs layer by layer, its linear layers' products through cuBLASLt
// from 16-bit copies of their operands, everything else in fp32. The *_unfused types take the
// per-layer path even for a network the fused kernels take (to compare the two).
//   etnn::Model<Net, etnn::bf16, etnn::Cuda> model(0);   // model.parameters() is float*
// bf16 keeps fp32's exponent range with 8 bits of mantissa; fp16 has 11 bits of mantissa but
// overflows past 65504 and flushes gradients below 2^-24 to zero, so the Trainer scales the loss
// of an fp16 model (TrainerOptions::loss_scaling, as torch.cuda.amp.GradScaler).
#include <type_traits>

namespace etnn {

struct bf16 {};
struct bf16_unfused {};
struct fp16 {};
struct fp16_unfused {};

// The format a model's matrix products read their operands in: the model's own scalar type, or
// a 16-bit copy (with fp32 accumulation).
enum class Products { own, bf16, fp16 };

template <class Scalar>
inline constexpr Products products_of = std::is_same_v<Scalar, bf16> || std::is_same_v<Scalar, bf16_unfused>
                                            ? Products::bf16
                                        : std::is_same_v<Scalar, fp16> || std::is_same_v<Scalar, fp16_unfused>
                                            ? Products::fp16
                                            : Products::own;

template <class Scalar>
inline constexpr bool mixed_precision = products_of<Scalar> != Products::own;

// The type a model keeps its parameters (and takes its data) in.
template <class Scalar>
using master_t = std::conditional_t<mixed_precision<Scalar>, float, Scalar>;

}  // namespace etnn
