#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// cuda::runtime(): the one door through which etnn calls the CUDA runtime and cuBLASLt. Each
// method has the name and arguments of the call it makes:
//   ETNN_CHECK_CUDA(cuda::runtime().cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cuda::stream()));
// and kernels launch through cuda::launch (cuda/runtime.hpp), which asks runtime().launches(name).
// So a program can watch every call a training step makes, or answer the calls itself: a
// ReplaceRuntime installs a subclass for the process. tests/cuda/test_step_calls.cu installs one
// that records each call and emulates the device in host memory, to check on a machine without a
// GPU which calls a CUDA step makes and which of them wait for the device. The default forwards
// each call and costs one indirect call per call into the runtime.
// Not routed: cudaGetErrorName and cudaGetErrorString (they only describe an error code), and
// NCCL's own calls (dist/nccl.hpp), which the host cannot emulate.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace etnn::cuda {

class Runtime {
 public:
  virtual ~Runtime() = default;

  // The device.
  virtual cudaError_t cudaGetDeviceCount(int* count) { return ::cudaGetDeviceCount(count); }
  virtual cudaError_t cudaGetDevice(int* device) { return ::cudaGetDevice(device); }
  virtual cudaError_t cudaSetDevice(int device) { return ::cudaSetDevice(device); }
  virtual cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
    return ::cudaDeviceGetAttribute(value, attribute, device);
  }
  virtual cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* p) {
    return ::cudaPointerGetAttributes(attributes, p);
  }
  virtual cudaError_t cudaGetLastError() { return ::cudaGetLastError(); }

  // Kernels. launches(name): a launch of the kernel `name` is about to be made; false skips it
  // (an emulated device runs no kernel).
  virtual bool launches(const char* /*name*/) { return true; }
  virtual cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, const void* kernel) {
    return ::cudaFuncGetAttributes(attributes, kernel);
  }
  virtual cudaError_t cudaFuncSetAttribute(const void* kernel, cudaFuncAttribute attribute, int value) {
    return ::cudaFuncSetAttribute(kernel, attribute, value);
  }

  // Memory.
  virtual cudaError_t cudaMallocAsync(void** p, std::size_t bytes, cudaStream_t stream) {
    return ::cudaMallocAsync(p, bytes, stream);
  }
  virtual cudaError_t cudaFreeAsync(void* p, cudaStream_t stream) { return ::cudaFreeAsync(p, stream); }
  virtual cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                                      cudaStream_t stream) {
    return ::cudaMemcpyAsync(dst, src, bytes, kind, stream);
  }
  virtual cudaError_t cudaMemcpy2DAsync(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                                        std::size_t width, std::size_t height, cudaMemcpyKind kind,
                                        cudaStream_t stream) {
    return ::cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, height, kind, stream);
  }
  virtual cudaError_t cudaMemsetAsync(void* p, int value, std::size_t bytes, cudaStream_t stream) {
    return ::cudaMemsetAsync(p, value, bytes, stream);
  }
  virtual cudaError_t cudaHostAlloc(void** p, std::size_t bytes, unsigned flags) {
    return ::cudaHostAlloc(p, bytes, flags);
  }
  virtual cudaError_t cudaFreeHost(void* p) { return ::cudaFreeHost(p); }

  // Streams and events.
  virtual cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
    return ::cudaStreamCreateWithFlags(stream, flags);
  }
  virtual cudaError_t cudaStreamDestroy(cudaStream_t stream) { return ::cudaStreamDestroy(stream); }
  virtual cudaError_t cudaStreamSynchronize(cudaStream_t stream) { return ::cudaStreamSynchronize(stream); }
  virtual cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
    return ::cudaStreamWaitEvent(stream, event, flags);
  }
  virtual cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
    return ::cudaEventCreateWithFlags(event, flags);
  }
  virtual cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    return ::cudaEventRecord(event, stream);
  }
  virtual cudaError_t cudaEventQuery(cudaEvent_t event) { return ::cudaEventQuery(event); }
  virtual cudaError_t cudaEventSynchronize(cudaEvent_t event) { return ::cudaEventSynchronize(event); }
  virtual cudaError_t cudaEventDestroy(cudaEvent_t event) { return ::cudaEventDestroy(event); }

  // Graphs.
  virtual cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
    return ::cudaStreamIsCapturing(stream, status);
  }
  virtual cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
    return ::cudaStreamBeginCapture(stream, mode);
  }
  virtual cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
    return ::cudaStreamEndCapture(stream, graph);
  }
  virtual cudaError_t cudaGraphInstantiate(cudaGraphExec_t* executable, cudaGraph_t graph,
                                           unsigned long long flags) {
    return ::cudaGraphInstantiate(executable, graph, flags);
  }
  virtual cudaError_t cudaGraphLaunch(cudaGraphExec_t executable, cudaStream_t stream) {
    return ::cudaGraphLaunch(executable, stream);
  }
  virtual cudaError_t cudaGraphDestroy(cudaGraph_t graph) { return ::cudaGraphDestroy(graph); }
  virtual cudaError_t cudaGraphExecDestroy(cudaGraphExec_t executable) { return ::cudaGraphExecDestroy(executable); }

  // cuBLASLt.
  virtual cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) { return ::cublasLtCreate(handle); }
  virtual cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                                  cudaDataType_t scale) {
    return ::cublasLtMatmulDescCreate(desc, compute, scale);
  }
  virtual cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
    return ::cublasLtMatmulDescDestroy(desc);
  }
  virtual cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                                        cublasLtMatmulDescAttributes_t attribute, const void* value,
                                                        std::size_t bytes) {
    return ::cublasLtMatmulDescSetAttribute(desc, attribute, value, bytes);
  }
  virtual cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type,
                                                    std::uint64_t rows, std::uint64_t cols, std::int64_t ld) {
    return ::cublasLtMatrixLayoutCreate(layout, type, rows, cols, ld);
  }
  virtual cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
    return ::cublasLtMatrixLayoutDestroy(layout);
  }
  virtual cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* preference) {
    return ::cublasLtMatmulPreferenceCreate(preference);
  }
  virtual cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
    return ::cublasLtMatmulPreferenceDestroy(preference);
  }
  virtual cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t preference,
                                                              cublasLtMatmulPreferenceAttributes_t attribute,
                                                              const void* value, std::size_t bytes) {
    return ::cublasLtMatmulPreferenceSetAttribute(preference, attribute, value, bytes);
  }
  virtual cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                                        cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                                        cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                                        cublasLtMatmulPreference_t preference, int requested,
                                                        cublasLtMatmulHeuristicResult_t* results, int* found) {
    return ::cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, c, d, preference, requested, results, found);
  }
  virtual cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                                        const void* a, cublasLtMatrixLayout_t a_layout, const void* b,
                                        cublasLtMatrixLayout_t b_layout, const void* beta, const void* c,
                                        cublasLtMatrixLayout_t c_layout, void* d, cublasLtMatrixLayout_t d_layout,
                                        const cublasLtMatmulAlgo_t* algorithm, void* workspace,
                                        std::size_t workspace_bytes, cudaStream_t stream) {
    return ::cublasLtMatmul(handle, desc, alpha, a, a_layout, b, b_layout, beta, c, c_layout, d, d_layout, algorithm,
                            workspace, workspace_bytes, stream);
  }
};

namespace detail {
inline Runtime*& installed_runtime() {
  static Runtime forwarding;
  static Runtime* installed = &forwarding;
  return installed;
}
}  // namespace detail

// The runtime etnn calls: the CUDA runtime itself unless a ReplaceRuntime is alive.
inline Runtime& runtime() { return *detail::installed_runtime(); }

// While one lives, every call etnn makes goes to `replacement` (for the whole process, every
// thread). Install it before etnn's first CUDA call: the stream, scratch and cuBLASLt handle made
// then live until exit and belong to the runtime that made them.
class ReplaceRuntime {
 public:
  explicit ReplaceRuntime(Runtime& replacement) : previous_(detail::installed_runtime()) {
    detail::installed_runtime() = &replacement;
  }
  ~ReplaceRuntime() { detail::installed_runtime() = previous_; }
  ReplaceRuntime(const ReplaceRuntime&) = delete;
  ReplaceRuntime& operator=(const ReplaceRuntime&) = delete;

 private:
  Runtime* previous_;
};

}  // namespace etnn::cuda
