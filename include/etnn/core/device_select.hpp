#pragma once
// Run-time choice among the compile-time devices.
//   etnn::dispatch(etnn::best_device(), [&]<class Device>(Device) { run<Device>(); });
#include <utility>

#include "device.hpp"
#include "error.hpp"

namespace etnn {

enum class DeviceKind { cpu, cuda };

// The fastest device this binary can use here. A build without CUDA always answers Cpu
// and never mentions CUDA.
inline DeviceKind best_device() { return DeviceKind::cpu; }

// Calls f(Device{}) for the device named by kind; f is a generic lambda.
template <class F>
decltype(auto) dispatch(DeviceKind kind, F&& f) {
  if (kind == DeviceKind::cuda) {
    throw UnavailableError(
        "etnn::dispatch: the CUDA device was requested but this binary was built without CUDA; "
        "rebuild with nvcc and -DETNN_WITH_CUDA=ON, or use etnn::DeviceKind::cpu");
  }
  return std::forward<F>(f)(Cpu{});
}

}  // namespace etnn
