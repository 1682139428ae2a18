#pragma once
// Private to core/: include <etnn/core/core.hpp> or <etnn/etnn.hpp>.
// The generic compile-time checks: shapes and devices. Each folder keeps its own checks in its
// checks.hpp.
// Each check is a consteval function whose static_assert message starts with a grep-able key
// (ETNN_...) and says how to fix it; the node that needs it writes
// `static_assert(check::something<...>());`. tests/compile_fail/ holds one program per message.
#include <type_traits>

#include "device.hpp"

namespace etnn::check {

template <int... Dims>
consteval bool shape_dims() {
  static_assert(sizeof...(Dims) > 0, "ETNN_SHAPE_EMPTY: etnn::Shape needs at least one dimension");
  static_assert(((Dims > 0) && ...), "ETNN_SHAPE_NONPOSITIVE: every dimension of etnn::Shape must be positive");
  return true;
}

template <class Device>
consteval bool device_available() {
  static_assert(device_compiled<Device>,
                "ETNN_DEVICE_UNAVAILABLE: this device's backend is not part of the build; etnn::Cuda "
                "needs nvcc and -DETNN_WITH_CUDA=ON (the CUDA backend), otherwise use etnn::Cpu");
  return true;
}

}  // namespace etnn::check
