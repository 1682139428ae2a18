#pragma once
// Private to backend/: include <etnn/backend/backend.hpp> or <etnn/etnn.hpp>.
// 2-D convolution's forward and backward on either device: conv2d_forward, conv2d_backward.
// The dispatch header of this op family (dlib's tensor_tools idea): it includes the CPU kernels
// always and the CUDA ones only under nvcc, so that layers and losses call the overloads for
// etnn::Cpu and etnn::Cuda by their device tag and never name a backend themselves.
#include "../cpu/conv.hpp"
#if defined(__CUDACC__)
#include "../cuda/conv.hpp"
#endif
