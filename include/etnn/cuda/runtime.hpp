#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// The CUDA runtime as etnn uses it: every call made through cuda::runtime() (cuda/runtime_api.hpp)
// and checked, every kernel launched through cuda::launch, all work on one stream (but a
// recording's).
//   ETNN_CHECK_CUDA(runtime().cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream()));
//   launch("etnn::fill", fill_kernel<T>, {grid_blocks(n), 256}, dst, n, value);
// A failed call throws etnn::DeviceError naming the call, the error and where it was made.
// Kernels, copies, cuBLASLt and (in a data-parallel job) NCCL's reductions are ordered on
// etnn::cuda::stream(), so the host waits only where it reads a result (a loss value, a norm).
#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>

#include "../core/error.hpp"
#include "grid_stride.hpp"
#include "runtime_api.hpp"

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
  (void)runtime().cudaGetLastError();  // clears the error unless the context is lost
  std::string error = cudaGetErrorName(status);
  error += ": ";
  error += cudaGetErrorString(status);
  fail("CUDA", call, error.c_str(), file, line);
}

}  // namespace detail

#define ETNN_CHECK_CUDA(call) ::etnn::cuda::detail::check((call), #call, __FILE__, __LINE__)

namespace detail {

inline cudaStream_t new_stream() {
  cudaStream_t created = nullptr;
  ETNN_CHECK_CUDA(runtime().cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking));
  return created;
}

// The stream this host thread is recording a CUDA graph on (RecordingStream), else null.
inline cudaStream_t& recording_stream() {
  thread_local cudaStream_t recording = nullptr;
  return recording;
}

}  // namespace detail

// The stream all of etnn's device work goes to, created on first use and shared by every host
// thread: their work runs in the order they enqueue it. It is never destroyed: the process's exit
// releases it with the context. While a thread records a CUDA graph (RecordingStream), that
// thread's work goes to a stream of its own instead.
inline cudaStream_t stream() {
  static const cudaStream_t shared = detail::new_stream();
  const cudaStream_t recording = detail::recording_stream();
  return recording != nullptr ? recording : shared;
}

// While one lives, stream() on this thread is the thread's own recording stream, for a graph to be
// recorded from (cuda/graph.hpp): another thread's work, which goes to the shared stream meanwhile,
// is never captured into this thread's graph. Nothing runs on it (a recording executes nothing);
// the graph is then launched on the shared stream.
class RecordingStream {
 public:
  RecordingStream() { detail::recording_stream() = own().stream; }
  ~RecordingStream() { detail::recording_stream() = nullptr; }
  RecordingStream(const RecordingStream&) = delete;
  RecordingStream& operator=(const RecordingStream&) = delete;

 private:
  struct Own {  // the thread's recording stream, made on its first recording, gone with the thread
    cudaStream_t stream = detail::new_stream();
    ~Own() { (void)runtime().cudaStreamDestroy(stream); }
  };
  static Own& own() {
    thread_local Own mine;
    return mine;
  }
};

// Waits until the device has finished everything on etnn's stream.
inline void synchronize() { ETNN_CHECK_CUDA(runtime().cudaStreamSynchronize(stream())); }

// Whether the work enqueued before `event` was recorded is done, without waiting. Its "not
// ready" is not left as the thread's last error, where the next launch's check would find it.
inline bool finished(cudaEvent_t event) {
  const cudaError_t status = runtime().cudaEventQuery(event);
  if (status == cudaErrorNotReady) {
    (void)runtime().cudaGetLastError();
    return false;
  }
  ETNN_CHECK_CUDA(status);
  return true;
}

// After a kernel launch: a bad configuration (or an earlier asynchronous failure) as an error
// naming the kernel.
inline void check_launch(const char* kernel) {
  const cudaError_t status = runtime().cudaGetLastError();
  if (status != cudaSuccess) {
    std::string call = "launch of ";
    call += kernel;
    detail::check(status, call.c_str(), __FILE__, __LINE__);
  }
}

// How a kernel is launched: grid and block sizes, dynamic shared memory, and the stream (etnn's).
struct LaunchShape {
  dim3 grid;
  dim3 block;
  std::size_t shared_bytes = 0;
  cudaStream_t on = stream();
};

// kernel<<<shape>>>(args...), checked (an error names the kernel as `name`), when runtime() lets
// it launch (runtime().launches(name)).
template <class... Params, class... Args>
void launch(const char* name, void (*kernel)(Params...), const LaunchShape& shape, Args&&... args) {
  if (!runtime().launches(name)) return;
  kernel<<<shape.grid, shape.block, shape.shared_bytes, shape.on>>>(std::forward<Args>(args)...);
  check_launch(name);
}

// This thread's share of the grid-stride loop over [begin, end) (cuda/grid_stride.hpp), or [0, n):
//   for (const std::size_t i : grid_stride(n)) y[i] = f(x[i]);
__device__ inline GridStride grid_stride(std::size_t begin, std::size_t end) {
  return {blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x,
          static_cast<std::size_t>(gridDim.x) * blockDim.x, begin, end};
}
__device__ inline GridStride grid_stride(std::size_t n) { return grid_stride(0, n); }

}  // namespace etnn::cuda
