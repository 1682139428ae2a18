#pragma once
// Private to optim/: include <etnn/optim/optim.hpp> or <etnn/etnn.hpp>.
// etnn::optim::ParameterSet: what an optimizer (and a checkpoint) needs of the thing whose
// parameters it updates. An etnn::Model is one; so is a loss with parameters of its own (a margin
// head's class weights, CenterLoss's centers), which gets its own optimizer as in
// pytorch-metric-learning:
//   etnn::optim::Adam opt(model, {.lr = 1e-3f});
//   etnn::optim::SGD head_opt(arcface, {.lr = 0.01f});
// A parameter set has
//   value_type, device                       its scalar type and device
//   num_params                               its trainable values (PyTorch's sum of numel())
//   flat_size                                the length of its flat parameter and gradient buffers:
//                                            those values and the zeros that align each tensor
//                                            (a Model's, nn/program.hpp), which stay zero
//   parameters(), gradients(), zero_grad()   those buffers (the gradients accumulate until zeroed)
//   named_parameters()                       its tensors as slices of them, named like a state_dict
// and either is a Model (network, program: the layer ends and the description come from the
// network type) or names them itself:
//   param_ends                               end offsets of its gradient buckets, ascending, the last flat_size
//   describe()                               a one-line description (rank agreement, checkpoints)
// Non-trainable buffers (num_buffers, buffers(), named_buffers()) are optional.
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "../nn/model.hpp"

namespace etnn::optim {

namespace detail {
template <class P>
concept ModelLike = requires {
  typename P::network;
  typename P::program;
};
template <class P>
concept SelfDescribed = requires {
  { P::describe() } -> std::convertible_to<std::string>;
  { std::span<const std::size_t>(P::param_ends) };
};
}  // namespace detail

template <class P>
concept ParameterSet = requires(P& p) {
  typename P::value_type;
  typename P::device;
  { P::num_params } -> std::convertible_to<std::size_t>;
  { P::flat_size } -> std::convertible_to<std::size_t>;
  { p.parameters() } -> std::same_as<typename P::value_type*>;
  { p.gradients() } -> std::same_as<typename P::value_type*>;
  p.zero_grad();
  { P::named_parameters() } -> std::same_as<std::vector<NamedParameter>>;
} && (detail::ModelLike<P> || detail::SelfDescribed<P>);

// The end offset of each layer's parameters (a Model's; the set's own units otherwise), in order.
template <ParameterSet P>
constexpr std::span<const std::size_t> parameter_ends() {
  if constexpr (detail::ModelLike<P>)
    return P::program::param_ends;
  else
    return P::param_ends;
}

// Where a gradient bucket may end, ascending, the last flat_size: a Model's layer ends and the
// row blocks of its large weights (nn::Program::gradient_cuts), the set's own units otherwise.
template <ParameterSet P>
constexpr std::span<const std::size_t> gradient_cuts() {
  if constexpr (detail::ModelLike<P>)
    return P::program::gradient_cuts;
  else
    return parameter_ends<P>();
}

// P's tensors (named_parameters()) in the order of their offsets, made once.
template <ParameterSet P>
const std::vector<NamedParameter>& tensors_in_flat_order() {
  static const std::vector<NamedParameter> tensors = [] {
    std::vector<NamedParameter> all = P::named_parameters();
    std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
    return all;
  }();
  return tensors;
}

// "nn::input<784> >> ..." for a Model, the set's own description otherwise.
template <ParameterSet P>
std::string describe() {
  if constexpr (detail::ModelLike<P>)
    return P::network::describe();
  else
    return P::describe();
}

// Values in buffers() (0 when the set has none).
template <ParameterSet P>
constexpr std::size_t num_buffers() {
  if constexpr (requires { P::num_buffers; })
    return P::num_buffers;
  else
    return 0;
}

}  // namespace etnn::optim
