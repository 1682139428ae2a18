#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// Description of one parameter tensor of a layer: its PyTorch name suffix ("weight", "bias"),
// its shape in PyTorch's layout, and where it lives inside the layer's slice of the flat buffer.
// Every tensor starts at a multiple of region_alignment_values (core/alignment.hpp): a layer
// with several lays them out with aligned_layout, and the zeros between them are part of its
// slice (its num_params) but of no tensor.
#include <array>
#include <cstddef>
#include <string_view>

#include "../core/alignment.hpp"

namespace etnn::nn {

struct ParamInfo {
  std::string_view name;
  int rank;
  std::array<int, 4> shape;
  std::size_t offset;  // within the layer's parameters

  constexpr std::size_t numel() const {
    std::size_t n = 1;
    for (int i = 0; i < rank; ++i) n *= static_cast<std::size_t>(shape[static_cast<std::size_t>(i)]);
    return n;
  }
};

// The tensors one after another, each from an aligned offset (the offsets given are ignored):
//   static constexpr auto params = aligned_layout<2>({{{"weight", 2, {Out, In, 0, 0}, 0},
//                                                      {"bias", 1, {Out, 0, 0, 0}, 0}}});
template <std::size_t N>
constexpr std::array<ParamInfo, N> aligned_layout(std::array<ParamInfo, N> infos) {
  std::size_t at = 0;
  for (ParamInfo& info : infos) {
    info.offset = at;
    at = aligned_values(at + info.numel());
  }
  return infos;
}

// The slice that holds the tensors: to the end of the last, rounded up (a layer's num_params).
template <std::size_t N>
constexpr std::size_t slice_values(const std::array<ParamInfo, N>& infos) {
  std::size_t end = 0;
  for (const ParamInfo& info : infos) end = end > info.offset + info.numel() ? end : info.offset + info.numel();
  return aligned_values(end);
}

// The values the tensors hold, without the zeros between them (PyTorch's sum of numel()).
template <std::size_t N>
constexpr std::size_t tensor_values(const std::array<ParamInfo, N>& infos) {
  std::size_t n = 0;
  for (const ParamInfo& info : infos) n += info.numel();
  return n;
}

// Whether every tensor starts aligned.
template <std::size_t N>
constexpr bool tensors_aligned(const std::array<ParamInfo, N>& infos) {
  for (const ParamInfo& info : infos)
    if (info.offset % region_alignment_values != 0) return false;
  return true;
}

}  // namespace etnn::nn
