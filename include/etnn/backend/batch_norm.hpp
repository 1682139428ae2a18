#pragma once
// Private to backend/: include <etnn/backend/backend.hpp> or <etnn/etnn.hpp>.
// Batch normalisation's forward and backward on either device: batch_norm_forward, batch_norm_backward.
// The dispatch header of this op family (dlib's tensor_tools idea): it includes the CPU kernels
// always and the CUDA ones only under nvcc, so that layers and losses call the overloads for
// etnn::Cpu and etnn::Cuda by their device tag and never name a backend themselves.
#include "../cpu/batch_norm.hpp"
#if defined(__CUDACC__)
#include "../cuda/batch_norm.hpp"
#endif
