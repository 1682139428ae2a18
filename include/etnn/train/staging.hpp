#pragma once
// Bringing user data to the model: a view of the model's scalar type on the model's device.
// Data already in that form passes through untouched; otherwise it is converted into a buffer
// that grows to the largest batch seen and is then reused (no allocation per step).
// Host data only: copies between devices come with the CUDA backend.
#include <algorithm>
#include <type_traits>

#include "../tensor/tensor.hpp"

namespace etnn::detail {

template <class T, class Device, class U, ShapeType S, class Src>
TensorView<const T, S, Device> stage_as(TensorView<const U, S, Src> v, Buffer<T, Device>& staging) {
  if constexpr (std::is_same_v<T, U> && std::is_same_v<Device, Src>) {
    return v;
  } else {
    staging.reserve_discard(v.size());
    std::transform(v.data(), v.data() + v.size(), staging.data(), [](U u) { return static_cast<T>(u); });
    return {staging.data(), v.batch()};
  }
}

}  // namespace etnn::detail
