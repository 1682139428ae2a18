#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// The fusion rewrite: a list of layer specs bound to an input shape becomes a list of Layers.
//   linear<N> >> activation   ->  one DenseLayer<In, N, F>   (GEMM + fused epilogue)
//   conv2d<...> >> activation ->  one ConvLayer<..., F>       (likewise)
//   any other spec S          ->  S::bind<In, Index>
// Index counts specs as torch.nn.Sequential counts modules, so a fused pair keeps the linear's
// index for its parameter names and the activation's index is skipped.
#include "../core/type_list.hpp"
#include "specs.hpp"

namespace etnn::nn::detail {

template <ShapeType In, int Index, class... Specs>
struct Plan;

template <ShapeType In, int Index>
struct Plan<In, Index> {
  using layers = TypeList<>;
  using out_shape = In;
};

template <ShapeType In, int Index, class S, class... Rest>
struct Plan<In, Index, S, Rest...> {
  using head = typename S::template bind<In, Index>;
  using tail = Plan<typename head::out_shape, Index + 1, Rest...>;
  using layers = Prepend<head, typename tail::layers>;
  using out_shape = typename tail::out_shape;
};

template <class S>
concept Fusable = requires { typename S::template bind_fused<Shape<1, 1, 1>, fn::Identity, 0>; };

template <ShapeType In, int Index, Fusable S, class F, class... Rest>
struct Plan<In, Index, S, Activation<F>, Rest...> {
  using head = typename S::template bind_fused<In, F, Index>;
  using tail = Plan<typename head::out_shape, Index + 2, Rest...>;
  using layers = Prepend<head, typename tail::layers>;
  using out_shape = typename tail::out_shape;
};

}  // namespace etnn::nn::detail
