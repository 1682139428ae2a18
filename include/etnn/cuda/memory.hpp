#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// Device memory: stream-ordered allocation on etnn's stream (cudaMallocAsync draws from the
// device's memory pool, so a Trainer's buffers come and go without synchronising the device), and
// copies between host and device memory.
// No allocation happens while etnn's stream is being recorded into a CUDA graph: the graph would
// own the memory (an allocation node) while the Buffer holding it outlives the recording, so
// allocate() refuses with an error naming the fix, which a GraphCache turns into its reason().
#include <algorithm>
#include <cstddef>
#include <new>
#include <string>
#include <vector>

#include "../core/device.hpp"
#include "../tensor/buffer.hpp"
#include "../tensor/copy.hpp"
#include "runtime.hpp"

namespace etnn {

inline void* Cuda::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  ETNN_CHECK_CUDA(cuda::runtime().cudaStreamIsCapturing(cuda::stream(), &capture));
  if (capture != cudaStreamCaptureStatusNone)
    throw DeviceError("etnn::Cuda::allocate: " + std::to_string(bytes) +
                      " bytes of device memory asked for while etnn's stream is being recorded into a CUDA "
                      "graph; allocate before recording (as nn::TrainingPass::reserve sizes a step's buffers and "
                      "scratch before its graphs are recorded)");
  void* p = nullptr;
  const cudaError_t status = cuda::runtime().cudaMallocAsync(&p, bytes, cuda::stream());
  if (status == cudaErrorMemoryAllocation) {
    (void)cuda::runtime().cudaGetLastError();
    throw std::bad_alloc();
  }
  ETNN_CHECK_CUDA(status);
  return p;
}

inline void Cuda::deallocate(void* p) noexcept {
  // Errors are ignored: this runs in destructors, possibly after the context is gone at exit.
  if (cuda::runtime().cudaFreeAsync(p, cuda::stream()) != cudaSuccess) (void)cuda::runtime().cudaGetLastError();
}

// n values from device memory into host memory; returns when they have arrived.
template <class T>
void copy_to_host(Cuda, T* host, const T* device, std::size_t n) {
  if (n == 0) return;
  ETNN_CHECK_CUDA(cuda::runtime().cudaMemcpyAsync(host, device, n * sizeof(T), cudaMemcpyDeviceToHost, cuda::stream()));
  cuda::synchronize();
}

// n values from host memory into device memory, ordered on etnn's stream. The host memory may be
// reused on return: from pageable memory (all etnn passes) cudaMemcpyAsync returns once the values
// are staged for the transfer, so no wait for the device is needed.
template <class T>
void copy_from_host(Cuda, T* device, const T* host, std::size_t n) {
  if (n == 0) return;
  ETNN_CHECK_CUDA(cuda::runtime().cudaMemcpyAsync(device, host, n * sizeof(T), cudaMemcpyHostToDevice, cuda::stream()));
}

// copy_rows (tensor/copy.hpp) in device memory: one strided copy on etnn's stream.
template <class T>
void copy_rows(Cuda, const T* src, std::size_t src_pitch, T* dst, std::size_t dst_pitch, std::size_t width,
               std::size_t rows) {
  if (rows == 0 || width == 0) return;
  ETNN_CHECK_CUDA(cuda::runtime().cudaMemcpy2DAsync(dst, dst_pitch * sizeof(T), src, src_pitch * sizeof(T),
                                                     width * sizeof(T), rows, cudaMemcpyDeviceToDevice,
                                                     cuda::stream()));
}

namespace cuda {

// Device scratch shared by every call of one kind on one host thread (a kernel's staging, partial
// sums, operand copies; cuda/per_thread.hpp gives each thread its own) that only grows: at(n)
// gives at least n values, its contents undefined. An outgrown buffer is kept, not freed: a CUDA
// graph recorded while it was current still points at it, and a replay must not read freed
// memory. Growth at least doubles, so what is kept stays under four times the largest need.
template <class T>
class GrowingScratch {
 public:
  T* at(std::size_t n) {
    if (buffers_.empty() || buffers_.back().size() < n) {
      const std::size_t grown = buffers_.empty() ? n : std::max(n, 2 * buffers_.back().size());
      buffers_.emplace_back(grown);
    }
    return buffers_.back().data();
  }

 private:
  std::vector<Buffer<T, Cuda>> buffers_;
};

}  // namespace cuda

}  // namespace etnn
