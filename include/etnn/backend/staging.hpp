#pragma once
// Private to backend/: include <etnn/backend/backend.hpp> or <etnn/etnn.hpp>.
// Bringing user data to the model: a view of the model's scalar type on the model's device.
// Data already in that form passes through untouched; otherwise it is converted (and, for a
// device model, copied from host memory) into a buffer that grows to the largest batch seen and is
// then reused: no allocation per step.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "../tensor/tensor.hpp"
#include "memory.hpp"

namespace etnn::backend {

template <class T, class Device, class U, ShapeType S, class Src>
TensorView<const T, S, Device> stage_as(TensorView<const U, S, Src> v, Buffer<T, Device>& staging) {
  static_assert(std::is_same_v<Src, Device> || std::is_same_v<Src, Cpu>,
                "etnn: data on one device cannot feed a model on another; pass host data or data on the model's device");
  if constexpr (std::is_same_v<T, U> && std::is_same_v<Device, Src>) {
    return v;
  } else if constexpr (std::is_same_v<Device, Src>) {  // host data of another scalar type
    staging.reserve_discard(v.size());
    std::transform(v.data(), v.data() + v.size(), staging.data(), [](U u) { return static_cast<T>(u); });
    return {staging.data(), v.batch()};
  } else {  // host data for a device model
    staging.reserve_discard(v.size());
    if constexpr (std::is_same_v<T, U>) {
      copy_from_host(Device{}, staging.data(), v.data(), v.size());
    } else {
      thread_local std::vector<T> converted;
      converted.assign(v.data(), v.data() + v.size());
      copy_from_host(Device{}, staging.data(), converted.data(), converted.size());
    }
    return {staging.data(), v.batch()};
  }
}

}  // namespace etnn::backend
