#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// Description of one parameter tensor of a layer: its PyTorch name suffix ("weight", "bias"),
// its shape in PyTorch's layout, and where it lives inside the layer's slice of the flat buffer.
#include <array>
#include <cstddef>
#include <string_view>

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

}  // namespace etnn::nn
