#pragma once
// Private to backend/: include <etnn/backend/backend.hpp> or <etnn/etnn.hpp>.
// The loops of the losses on either device: elementwise_loss (an element-wise term summed over
// every value) and label_rows_loss (a row functor summed over the rows of class scores), what they
// return (LossValue: on a CUDA device, the loss on its way to the host), and the scratch a loss on
// class indices keeps for the device's loop (LabelRowsScratch; nothing on a host-only build).
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

// What a loss computed on Device returns: the value itself on the host; on a CUDA device the value
// on its way to the host (cuda::PendingLoss<T>), which converts to T when read.
template <class T, class Device>
struct LossValueOf {
  using type = T;
};
#if defined(__CUDACC__)
template <class T>
struct LossValueOf<T, Cuda> {
  using type = cuda::PendingLoss<T>;
};
#endif
template <class T, class Device>
using LossValue = typename LossValueOf<T, Device>::type;

}  // namespace etnn::backend
