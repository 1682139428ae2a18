#pragma once
// Private to backend/: include <etnn/backend/backend.hpp> or <etnn/etnn.hpp>.
// Copies between host and device memory and of row blocks (copy_rows) on either device.
// The dispatch header of this op family (dlib's tensor_tools idea): it includes the CPU kernels
// always and the CUDA ones only under nvcc, so that layers and losses call the overloads for
// etnn::Cpu and etnn::Cuda by their device tag and never name a backend themselves.
#include "../tensor/copy.hpp"
#if defined(__CUDACC__)
#include "../cuda/memory.hpp"
#endif
