#pragma once
// A CUDA runtime emulated in host memory, installed in etnn's runtime layer (cuda/runtime_api.hpp)
// by a test that runs a CUDA model's host code on a machine without a GPU, to see which calls it
// makes. "Device" memory is host memory, zeroed when allocated; copies and memsets happen at once
// on the host (none while a stream is recorded: a recording executes nothing); kernels and
// cuBLASLt products do not run, so the model computes nothing (every result stays zero). Streams,
// events, graphs and cuBLASLt objects are opaque handles.
// Every call is logged with whether it was made while a graph was recorded (its work then runs in
// the graph's launches) and whether it makes the host wait for the device: a stream
// synchronisation or an event's, a copy into pageable host memory, a copy out of pageable host
// memory (cudaMemcpyAsync stages it, and may wait for the stream to do so). A copy between the
// device and pinned host memory (cudaHostAlloc's) does not wait. Events report their work done,
// unless device_lags: then cudaEventQuery answers "not ready", as when the host runs ahead, until
// a wait reaches it. The device works through etnn's one stream in order: a wait for an event
// completes every event recorded before it too, and a wait for the stream (its synchronisation,
// a copy into pageable memory) completes them all. While the device lags, every event no wait has
// reached answers "not ready", even one recorded before the lag began (which a real device would
// likely have finished): a test can have the verdicts already sent stay on their way.
#include <etnn/etnn.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace cuda_test {

class EmulatedRuntime final : public etnn::cuda::Runtime {
 public:
  struct Call {
    std::string name;       // the runtime or cuBLASLt function, or "launch <kernel>"
    bool recorded = false;  // made while a graph was being recorded
    bool waits = false;     // the host waits for the device's work so far
    std::string after;      // the last kernel launched or product enqueued before it (what it waits for)
  };

  std::vector<Call> calls;
  bool device_lags = false;  // cudaEventQuery answers cudaErrorNotReady
  // > 0: the graph launch this many launches from now fails (cudaErrorLaunchFailure), as a launch
  // on a device in trouble would.
  int graph_launches_until_failure = 0;
  // Stands in for the kernels, which do not run here: called after each copy from the device into
  // host memory with where it went, its bytes and the last kernel launched before it, so that a
  // test can put there what the device would have computed.
  std::function<void(void* dst, std::size_t bytes, const std::string& after)> device_results;
  void clear() { calls.clear(); }
  std::size_t count(const std::string& name) const {
    std::size_t n = 0;
    for (const Call& c : calls) n += c.name == name;
    return n;
  }

  ~EmulatedRuntime() override {
    for (auto& [address, bytes] : allocations_) std::free(reinterpret_cast<void*>(address));
    for (auto& [address, bytes] : pinned_) std::free(reinterpret_cast<void*>(address));
  }

  cudaError_t cudaGetDeviceCount(int* count) override {
    log("cudaGetDeviceCount");
    *count = 1;
    return cudaSuccess;
  }
  cudaError_t cudaGetDevice(int* device) override {
    log("cudaGetDevice");
    *device = 0;
    return cudaSuccess;
  }
  cudaError_t cudaSetDevice(int) override { return log("cudaSetDevice"); }
  cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int) override {
    log("cudaDeviceGetAttribute");
    *value = attribute == cudaDevAttrComputeCapabilityMajor ? 9 : 0;  // an sm_90
    return cudaSuccess;
  }
  cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* p) override {
    log("cudaPointerGetAttributes");
    *attributes = {};
    attributes->type = on_device(p) ? cudaMemoryTypeDevice : cudaMemoryTypeUnregistered;
    return cudaSuccess;
  }
  cudaError_t cudaGetLastError() override { return cudaSuccess; }

  bool launches(const char* name) override {
    log(std::string("launch ") + name);
    last_work_ = name;
    return false;
  }
  cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, const void*) override {
    log("cudaFuncGetAttributes");
    *attributes = {};
    return cudaSuccess;
  }
  cudaError_t cudaFuncSetAttribute(const void*, cudaFuncAttribute, int) override {
    return log("cudaFuncSetAttribute");
  }

  cudaError_t cudaMallocAsync(void** p, std::size_t bytes, cudaStream_t) override {
    log("cudaMallocAsync");
    *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    std::memset(*p, 0, bytes);
    allocations_[reinterpret_cast<std::uintptr_t>(*p)] = bytes;
    return cudaSuccess;
  }
  cudaError_t cudaFreeAsync(void* p, cudaStream_t) override {
    log("cudaFreeAsync");
    allocations_.erase(reinterpret_cast<std::uintptr_t>(p));
    std::free(p);
    return cudaSuccess;
  }
  cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind,
                              cudaStream_t stream) override {
    const cudaError_t status = copy("cudaMemcpyAsync", dst, src, stream, [&] { std::memcpy(dst, src, bytes); });
    if (status == cudaSuccess && device_results && on_device(src) && !on_device(dst) && !recording(stream))
      device_results(dst, bytes, last_work_);
    return status;
  }
  cudaError_t cudaMemcpy2DAsync(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                                std::size_t width, std::size_t height, cudaMemcpyKind, cudaStream_t stream) override {
    return copy("cudaMemcpy2DAsync", dst, src, stream, [&] {
      for (std::size_t row = 0; row < height; ++row)
        std::memcpy(static_cast<char*>(dst) + row * dst_pitch, static_cast<const char*>(src) + row * src_pitch, width);
    });
  }
  cudaError_t cudaHostAlloc(void** p, std::size_t bytes, unsigned) override {
    log("cudaHostAlloc");
    *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    pinned_[reinterpret_cast<std::uintptr_t>(*p)] = bytes;
    return cudaSuccess;
  }
  cudaError_t cudaFreeHost(void* p) override {
    log("cudaFreeHost");
    pinned_.erase(reinterpret_cast<std::uintptr_t>(p));
    std::free(p);
    return cudaSuccess;
  }
  cudaError_t cudaMemsetAsync(void* p, int value, std::size_t bytes, cudaStream_t stream) override {
    log("cudaMemsetAsync");
    if (!recording(stream)) std::memset(p, value, bytes);
    return cudaSuccess;
  }

  cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) override {
    log("cudaStreamCreateWithFlags");
    *stream = handle<cudaStream_t>();
    return cudaSuccess;
  }
  cudaError_t cudaStreamDestroy(cudaStream_t) override { return log("cudaStreamDestroy"); }
  cudaError_t cudaStreamSynchronize(cudaStream_t stream) override {
    if (recording(stream)) return cudaErrorStreamCaptureUnsupported;
    completed_through_ = records_;
    return log("cudaStreamSynchronize", true);
  }
  cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) override {
    return log("cudaStreamWaitEvent");
  }
  cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned) override {
    log("cudaEventCreateWithFlags");
    *event = handle<cudaEvent_t>();
    return cudaSuccess;
  }
  cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) override {
    recorded_at_[event] = ++records_;
    return log("cudaEventRecord");
  }
  cudaError_t cudaEventQuery(cudaEvent_t event) override {
    log("cudaEventQuery");
    return device_lags && !completed(event) ? cudaErrorNotReady : cudaSuccess;
  }
  cudaError_t cudaEventSynchronize(cudaEvent_t event) override {
    if (const auto it = recorded_at_.find(event); it != recorded_at_.end())
      completed_through_ = std::max(completed_through_, it->second);
    return log("cudaEventSynchronize", true);
  }
  cudaError_t cudaEventDestroy(cudaEvent_t) override { return log("cudaEventDestroy"); }

  cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) override {
    log("cudaStreamIsCapturing");
    *status = recording(stream) ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
  }
  cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) override {
    log("cudaStreamBeginCapture");
    recording_ = stream;
    return cudaSuccess;
  }
  cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* graph) override {
    recording_ = nullptr;
    log("cudaStreamEndCapture");
    *graph = handle<cudaGraph_t>();
    return cudaSuccess;
  }
  cudaError_t cudaGraphInstantiate(cudaGraphExec_t* executable, cudaGraph_t, unsigned long long) override {
    log("cudaGraphInstantiate");
    *executable = handle<cudaGraphExec_t>();
    return cudaSuccess;
  }
  cudaError_t cudaGraphLaunch(cudaGraphExec_t, cudaStream_t) override {
    const cudaError_t launched = log("cudaGraphLaunch");
    if (graph_launches_until_failure > 0 && --graph_launches_until_failure == 0) return cudaErrorLaunchFailure;
    last_work_ = "a graph";
    return launched;
  }
  cudaError_t cudaGraphDestroy(cudaGraph_t) override { return log("cudaGraphDestroy"); }
  cudaError_t cudaGraphExecDestroy(cudaGraphExec_t) override { return log("cudaGraphExecDestroy"); }

  cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) override { return made("cublasLtCreate", h); }
  cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t, cudaDataType_t) override {
    return made("cublasLtMatmulDescCreate", d);
  }
  cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t) override {
    return blas_log("cublasLtMatmulDescDestroy");
  }
  cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void*,
                                                std::size_t) override {
    return blas_log("cublasLtMatmulDescSetAttribute");
  }
  cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType, std::uint64_t, std::uint64_t,
                                            std::int64_t) override {
    return made("cublasLtMatrixLayoutCreate", l);
  }
  cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t) override {
    return blas_log("cublasLtMatrixLayoutDestroy");
  }
  cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) override {
    return made("cublasLtMatmulPreferenceCreate", p);
  }
  cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t) override {
    return blas_log("cublasLtMatmulPreferenceDestroy");
  }
  cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t,
                                                      cublasLtMatmulPreferenceAttributes_t, const void*,
                                                      std::size_t) override {
    return blas_log("cublasLtMatmulPreferenceSetAttribute");
  }
  cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                                cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                                cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                                                cublasLtMatmulHeuristicResult_t* results, int* found) override {
    *results = {};
    *found = 1;
    return blas_log("cublasLtMatmulAlgoGetHeuristic");
  }
  cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*,
                                cublasLtMatrixLayout_t, const void*, cublasLtMatrixLayout_t, const void*, const void*,
                                cublasLtMatrixLayout_t, void*, cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t*,
                                void*, std::size_t, cudaStream_t) override {
    log("cublasLtMatmul");
    last_work_ = "cublasLtMatmul";
    return CUBLAS_STATUS_SUCCESS;
  }

 private:
  bool recording(cudaStream_t stream) const { return stream != nullptr && stream == recording_; }
  bool on_device(const void* p) const { return within(allocations_, p); }
  bool pinned(const void* p) const { return within(pinned_, p); }
  static bool within(const std::map<std::uintptr_t, std::size_t>& blocks, const void* p) {
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    auto it = blocks.upper_bound(address);
    if (it == blocks.begin()) return false;
    --it;
    return address < it->first + it->second;
  }

  cudaError_t log(std::string name, bool waits = false) {
    calls.push_back({std::move(name), recording_ != nullptr, waits, last_work_});
    return cudaSuccess;
  }
  cublasStatus_t blas_log(std::string name) {
    log(std::move(name));
    return CUBLAS_STATUS_SUCCESS;
  }
  template <class Handle>
  cublasStatus_t made(std::string name, Handle* h) {
    *h = handle<Handle>();
    return blas_log(std::move(name));
  }

  // A copy from src to dst: into pageable host memory it waits for the device, out of pageable host
  // memory it may; to or from pinned memory it does not. Recorded, it is not done, and one to or from
  // host memory fails, as it does in a capture.
  template <class Copy>
  cudaError_t copy(const char* name, void* dst, const void* src, cudaStream_t stream, Copy&& copy) {
    const bool to_host = !on_device(dst);
    const bool from_host = !on_device(src);
    if (recording(stream) && (to_host || from_host)) return cudaErrorStreamCaptureUnsupported;
    std::string what = name;
    what += to_host ? (from_host ? " host to host" : " device to host")
                    : (from_host ? " host to device" : " device to device");
    const bool waits = (to_host && !pinned(dst)) || (from_host && !pinned(src));
    if (waits) completed_through_ = records_;
    log(what, waits);
    if (!recording(stream)) copy();
    return cudaSuccess;
  }

  // A distinct non-null opaque handle, valid until the runtime goes.
  template <class Handle>
  Handle handle() {
    handles_.push_back(std::make_unique<char>());
    return reinterpret_cast<Handle>(handles_.back().get());
  }

  std::map<std::uintptr_t, std::size_t> allocations_;  // device memory: address -> bytes
  std::map<std::uintptr_t, std::size_t> pinned_;       // pinned host memory: address -> bytes
  std::vector<std::unique_ptr<char>> handles_;
  // Events by their last record's number (1, 2, ...): those numbered up to completed_through_ are
  // done, even while the device lags.
  std::map<cudaEvent_t, std::uint64_t> recorded_at_;
  std::uint64_t records_ = 0;
  std::uint64_t completed_through_ = 0;
  bool completed(cudaEvent_t event) const {
    const auto it = recorded_at_.find(event);
    return it == recorded_at_.end() || it->second <= completed_through_;
  }
  cudaStream_t recording_ = nullptr;  // the stream being recorded into a graph
  std::string last_work_ = "nothing";
};

// While one lives, the emulated device lags: its events answer "not ready".
class LaggingDevice {
 public:
  explicit LaggingDevice(EmulatedRuntime& runtime) : runtime_(runtime) { runtime_.device_lags = true; }
  ~LaggingDevice() { runtime_.device_lags = false; }
  LaggingDevice(const LaggingDevice&) = delete;
  LaggingDevice& operator=(const LaggingDevice&) = delete;

 private:
  EmulatedRuntime& runtime_;
};

}  // namespace cuda_test
