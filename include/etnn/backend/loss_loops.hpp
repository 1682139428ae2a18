#pragma once
// Private to backend/: include <etnn/backend/backend.hpp> or <etnn/etnn.hpp>.
// The loops of the losses on either device: elementwise_loss (an element-wise term summed over
// every value) and label_rows_loss (a row functor summed over the rows of class scores), and the
// scratch a loss on class indices keeps for the device's loop (LabelRowsScratch; nothing on a
// host-only build).
// The dispatch header of this op family (dlib's tensor_tools idea): it includes the CPU kernels
// always and the CUDA ones only under nvcc, so that layers and losses call the overloads for
// etnn::Cpu and etnn::Cuda by their device tag and never name a backend themselves.
#include "../cpu/loss_loops.hpp"
#if defined(__CUDACC__)
#include "../cuda/loss_loops.hpp"
#endif

namespace etnn::backend {

#if defined(__CUDACC__)
using LabelRowsScratch = cuda::LabelRowsScratch;
#else
struct LabelRowsScratch {};
#endif

}  // namespace etnn::backend
