#pragma once
// Private to backend/: include <etnn/backend/backend.hpp> or <etnn/etnn.hpp>.
// Run-time choice among the compile-time devices.
//   etnn::dispatch(etnn::best_device(), [&]<class Device>(Device) { run<Device>(); });
#include <cstdio>
#include <string>
#include <utility>

#include "../core/device.hpp"
#include "../core/error.hpp"
#if defined(__CUDACC__)
#include "../cuda/probe.hpp"
#endif

namespace etnn {

enum class DeviceKind { cpu, cuda };

// The fastest device this binary can use here. A CUDA build answers Cuda when a usable GPU is
// present, else Cpu after printing one line to stderr saying why (once per process). A build
// without CUDA always answers Cpu and never mentions CUDA.
inline DeviceKind best_device() {
#if defined(__CUDACC__)
  static const DeviceKind kind = [] {
    const std::string why = cuda::detail::cuda_unavailable_reason();
    if (why.empty()) return DeviceKind::cuda;
    std::fprintf(stderr, "etnn: %s; running on the CPU\n", why.c_str());
    return DeviceKind::cpu;
  }();
  return kind;
#else
  return DeviceKind::cpu;
#endif
}

// Calls f(Device{}) for the device named by kind; f is a generic lambda. Asking for CUDA where it
// cannot run throws etnn::UnavailableError saying why.
template <class F>
decltype(auto) dispatch(DeviceKind kind, F&& f) {
  if (kind == DeviceKind::cuda) {
#if defined(__CUDACC__)
    const std::string why = cuda::detail::cuda_unavailable_reason();
    if (!why.empty()) {
      std::string message = "etnn::dispatch: the CUDA device was requested but ";
      message += why;
      message += "; use etnn::DeviceKind::cpu or etnn::best_device()";
      throw UnavailableError(message);
    }
    return std::forward<F>(f)(Cuda{});
#else
    throw UnavailableError(
        "etnn::dispatch: the CUDA device was requested but this binary was built without CUDA; "
        "rebuild with nvcc and -DETNN_WITH_CUDA=ON, or use etnn::DeviceKind::cpu");
#endif
  }
  return std::forward<F>(f)(Cpu{});
}

}  // namespace etnn
