#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// Whether this CUDA binary can run kernels here: a device is present, the driver is usable and
// one of the binary's architectures (CMAKE_CUDA_ARCHITECTURES) runs on it.
#include <cuda_runtime.h>

#include <string>

#include "runtime_api.hpp"

namespace etnn::cuda::detail {

// A kernel that does nothing: asking for its attributes loads the module, which fails when no
// architecture of this binary fits the device.
template <int = 0>
__global__ void cuda_probe_kernel() {}

// Empty when CUDA kernels can run on the current device; otherwise why not, in a few words.
inline std::string cuda_unavailable_reason() {
  int count = 0;
  cudaError_t status = runtime().cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)runtime().cudaGetLastError();
    std::string why = "no usable CUDA device (";
    why += cudaGetErrorString(status);
    why += ")";
    return why;
  }
  if (count == 0) return "no CUDA device";
  cudaFuncAttributes attributes{};
  status = runtime().cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(cuda_probe_kernel<>));
  if (status != cudaSuccess) {
    (void)runtime().cudaGetLastError();
    int device = 0, major = 0, minor = 0;
    (void)runtime().cudaGetDevice(&device);
    (void)runtime().cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    (void)runtime().cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    std::string why = "the GPU (sm_";
    why += std::to_string(major * 10 + minor);
    why += ") cannot run this binary's kernels (";
    why += cudaGetErrorString(status);
    why += "); rebuild with CMAKE_CUDA_ARCHITECTURES including it";
    return why;
  }
  return {};
}

}  // namespace etnn::cuda::detail
