#pragma once
// Private to backend/: include <etnn/backend/backend.hpp> or <etnn/etnn.hpp>.
// Elementwise expressions and index loops on either device: assign, fill, for_each_index.
// The dispatch header of this op family (dlib's tensor_tools idea): it includes the CPU kernels
// always and the CUDA ones only under nvcc, so that layers and losses call the overloads for
// etnn::Cpu and etnn::Cuda by their device tag and never name a backend themselves.
#include "../cpu/executor.hpp"
#if defined(__CUDACC__)
#include "../cuda/executor.hpp"
#endif
