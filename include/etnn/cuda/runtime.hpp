#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// The CUDA runtime as etnn uses it: every call checked, all work on one stream.
//   ETNN_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, etnn::cuda::stream()));
// A failed call throws etnn::DeviceError naming the call, the error and where it was made.
// Kernels, copies, cuBLASLt and (in a data-parallel job) NCCL's reductions are ordered on
// etnn::cuda::stream(), so the host waits only where it reads a result (a loss value, a norm).
#include <cuda_runtime.h>

#include <string>

#include "../core/error.hpp"
#include "grid_stride.hpp"

namespace etnn::cuda {

namespace detail {

[[noreturn]] inline void fail(const char* library, const char* call, const char* error, const char* file, int line) {
  std::string message = "etnn: ";
  message += library;
  message += " call ";
  message += call;
  message += " failed: ";
  message += error;
  message += " (";
  message += file;
  message += ":";
  message += std::to_string(line);
  message += ")";
  throw DeviceError(message);
}

inline void check(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  (void)cudaGetLastError();  // clears the error unless the context is lost
  std::string error = cudaGetErrorName(status);
  error += ": ";
  error += cudaGetErrorString(status);
  fail("CUDA", call, error.c_str(), file, line);
}

}  // namespace detail

#define ETNN_CHECK_CUDA(call) ::etnn::cuda::detail::check((call), #call, __FILE__, __LINE__)

// The stream all of etnn's device work goes to, created on first use. It is never destroyed:
// the process's exit releases it with the context.
inline cudaStream_t stream() {
  static const cudaStream_t s = [] {
    cudaStream_t created = nullptr;
    ETNN_CHECK_CUDA(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking));
    return created;
  }();
  return s;
}

// Waits until the device has finished everything on etnn's stream.
inline void synchronize() { ETNN_CHECK_CUDA(cudaStreamSynchronize(stream())); }

// After a kernel launch: a bad configuration (or an earlier asynchronous failure) as an error
// naming the kernel.
inline void check_launch(const char* kernel) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    std::string call = "launch of ";
    call += kernel;
    detail::check(status, call.c_str(), __FILE__, __LINE__);
  }
}

// This thread's share of the grid-stride loop over [begin, end) (cuda/grid_stride.hpp), or [0, n):
//   for (const std::size_t i : grid_stride(n)) y[i] = f(x[i]);
__device__ inline GridStride grid_stride(std::size_t begin, std::size_t end) {
  return {blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x,
          static_cast<std::size_t>(gridDim.x) * blockDim.x, begin, end};
}
__device__ inline GridStride grid_stride(std::size_t n) { return grid_stride(0, n); }

}  // namespace etnn::cuda
