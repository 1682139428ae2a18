#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// nn::Sequential<Specs...>: a chain of layer specs, built with operator>>.
// Starting with nn::input<...> it is a network: shapes, parameter count and layers are inferred
// at compile time.
//   constexpr auto mlp = nn::input<784> >> nn::linear<512> >> nn::relu >> nn::linear<10>;
//   using Mlp = decltype(mlp);   // nn::Sequential<nn::Input<784>, nn::Linear<512>, nn::ReLU, nn::Linear<10>>
#include <cstddef>
#include <string>
#include <type_traits>

#include "checks.hpp"
#include "plan.hpp"

namespace etnn::nn {

// A chain that does not start with nn::input is not a network: etnn::Model rejects it with
// ETNN_NO_INPUT. (Blocks spliced into networks arrive with nn::residual.)
template <class... Specs>
struct Sequential {
  static constexpr bool is_network = false;
};

template <InputSpecType First, class... Rest>
struct Sequential<First, Rest...> {
  static constexpr bool is_network = true;
  using input_shape = typename First::shape;
  using layers = typename detail::Plan<input_shape, 0, Rest...>::layers;  // TypeList of Layers
  using output_shape = typename detail::Plan<input_shape, 0, Rest...>::out_shape;

 private:
  template <class... Ls>
  static constexpr std::size_t sum_params(TypeList<Ls...>) {
    return (std::size_t{0} + ... + tensor_values(Ls::params));
  }
  template <class... Ls>
  static constexpr std::size_t sum_slices(TypeList<Ls...>) {
    return (std::size_t{0} + ... + param_slice_of<Ls>);
  }

 public:
  // Its trainable values, as PyTorch counts them (sum of p.numel()).
  static constexpr std::size_t num_params = sum_params(layers{});
  // The length of a model's flat parameter and gradient arrays: these values and the zeros that
  // start every tensor on a 256-byte boundary (nn/program.hpp).
  static constexpr std::size_t flat_size = sum_slices(layers{});

  // "input<784> >> linear<512> >> relu >> linear<10>"
  static std::string describe() { return (First::describe() + ... + (" >> " + Rest::describe())); }
};

namespace detail {
template <class T>
struct IsSequential : std::false_type {};
template <class... S>
struct IsSequential<Sequential<S...>> : std::true_type {};
template <class Chain, class Next>
struct Append;
template <class... S, class Next>
struct Append<Sequential<S...>, Next> {
  using type = Sequential<S..., Next>;
};
template <class... S, class... Next>
struct Append<Sequential<S...>, Sequential<Next...>> {  // a block spliced in: its specs, in order
  using type = Sequential<S..., Next...>;
};
}  // namespace detail

// A type usable as etnn::Model's network: a Sequential that starts with nn::input.
template <class Net>
concept Network = detail::IsSequential<Net>::value && requires { requires Net::is_network; };

// a >> b, where b is a spec or a block (a chain without nn::input, reused as often as wanted:
//   constexpr auto block = nn::residual(...) >> nn::residual(...);
//   constexpr auto net = nn::input_tokens<128, 96> >> nn::embedding<128> >> block >> block;)
template <class A, class B>
  requires(Spec<A> || detail::IsSequential<A>::value)
constexpr auto operator>>(A, B) {
  if constexpr (detail::IsSequential<B>::value) {
    static_assert(check::block_without_input<!B::is_network>());
  } else {
    static_assert(check::is_layer_spec<Spec<B>>());
    static_assert(check::input_first<!InputSpecType<B>>());
  }
  if constexpr (detail::IsSequential<A>::value) {
    return typename detail::Append<A, B>::type{};
  } else {
    return typename detail::Append<Sequential<A>, B>::type{};
  }
}

}  // namespace etnn::nn
