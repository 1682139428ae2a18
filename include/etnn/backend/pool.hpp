#pragma once
// Private to backend/: include <etnn/backend/backend.hpp> or <etnn/etnn.hpp>.
// 2-D max and average pooling on either device: pool2d_forward, pool2d_backward.
// The dispatch header of this op family (dlib's tensor_tools idea): it includes the CPU kernels
// always and the CUDA ones only under nvcc, so that layers and losses call the overloads for
// etnn::Cpu and etnn::Cuda by their device tag and never name a backend themselves.
#include "../cpu/pool.hpp"
#if defined(__CUDACC__)
#include "../cuda/pool.hpp"
#endif
