#pragma once
// Between a model's flat arrays, where every tensor starts on a 256-byte boundary with zeros
// between (nn/program.hpp), and its tensors named or concatenated as PyTorch has them.
#include <cstddef>
#include <stdexcept>
#include <string>

namespace etnn::test {

// Where the parameter tensor `name` ("1.weight") starts in Model's flat arrays.
template <class Model>
std::size_t parameter_offset(const std::string& name) {
  for (const auto& p : Model::named_parameters())
    if (p.name == name) return p.offset;
  throw std::invalid_argument("no parameter " + name);
}

// The flat index of value i of the tensors concatenated in state_dict order (PyTorch's
// torch.cat([p.flatten() for p in model.parameters()])).
template <class Model>
std::size_t flat_index(std::size_t i) {
  for (const auto& p : Model::named_parameters()) {
    if (i < p.numel) return p.offset + i;
    i -= p.numel;
  }
  throw std::out_of_range("past the model's parameters");
}

}  // namespace etnn::test
