#pragma once
// Private to backend/: include <etnn/backend/backend.hpp> or <etnn/etnn.hpp>.
// Bringing user data to the model: a view of the model's scalar type on the model's device.
// Data already in that form passes through untouched; otherwise it is converted (and, for a
// device model, sent from host memory) into a Staging buffer that grows to the largest batch seen
// and is then reused: no allocation per step. Host data for a CUDA model goes through pinned host
// memory (cuda/pinned_staging.hpp), so that sending it never makes the host wait for the device.
#include <algorithm>
#include <type_traits>

#include "../tensor/tensor.hpp"
#include "memory.hpp"
#if defined(__CUDACC__)
#include "../cuda/pinned_staging.hpp"
#endif

namespace etnn::backend {

namespace detail {
// How host data reaches the device's memory: directly on the host; through a ring of pinned slots
// on a CUDA device.
template <class Device>
struct HostToDevice {
  struct type {};
};
#if defined(__CUDACC__)
template <>
struct HostToDevice<Cuda> {
  using type = cuda::PinnedStaging;
};
#endif
}  // namespace detail

// Where stage_as puts the data it converts or sends: values on the model's device, and the way
// there from host memory.
template <class T, class Device>
struct Staging {
  Buffer<T, Device> values;
  [[no_unique_address]] typename detail::HostToDevice<Device>::type from_host;
};

template <class T, class Device, class U, ShapeType S, class Src>
TensorView<const T, S, Device> stage_as(TensorView<const U, S, Src> v, Staging<T, Device>& staging) {
  static_assert(std::is_same_v<Src, Device> || std::is_same_v<Src, Cpu>,
                "etnn: data on one device cannot feed a model on another; pass host data or data on the model's device");
  const auto convert = [&](T* to) {
    std::transform(v.data(), v.data() + v.size(), to, [](U u) { return static_cast<T>(u); });
  };
  if constexpr (std::is_same_v<T, U> && std::is_same_v<Device, Src>) {
    return v;
  } else if constexpr (std::is_same_v<Device, Src>) {  // host data of another scalar type
    static_assert(std::is_same_v<Device, Cpu>,
                  "etnn: data already on the device must be of the model's scalar type (it is not converted there); "
                  "pass host data, or device data of the model's value_type");
    staging.values.reserve_discard(v.size());
    convert(staging.values.data());
    return {staging.values.data(), v.batch()};
  } else {  // host data for a device model: converted into a pinned slot, sent from there
    staging.values.reserve_discard(v.size());
    staging.from_host.send(staging.values.data(), v.size(), convert);
    return {staging.values.data(), v.batch()};
  }
}

}  // namespace etnn::backend
