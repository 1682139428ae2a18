#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// A standalone elementwise activation (one not fused into a preceding linear layer).
//   y = f(x);   dx = dy (.) f'(x, y) (fn::chain), written over dy
#include "../backend/executor.hpp"
#include "../expr/expression.hpp"
#include "layer.hpp"

namespace etnn::nn {

template <ShapeType In, class F, int Index>
struct ActivationLayer : InPlaceLayer<In, Index> {
  static constexpr bool cuda_kernels = true;  // the expression executor of each device
  template <class T, class Device>
  static void forward(Device device, const Pass<T>&, const T*, const T* x, T* y, T*, int batch) {
    assign(device, y, expr::apply<F>(expr::ref(x, elements(batch))));
  }

  template <class T, class Device>
  static void backward(Device device, const Pass<T>&, const T*, T*, const T* x, const T* y, const T*, T* dy, T* dx,
                       int batch) {
    const std::size_t n = elements(batch);
    assign(device, dx, expr::chain<F>(expr::ref(dy, n), expr::ref(x, n), expr::ref(y, n)));
  }

 private:
  static std::size_t elements(int batch) { return static_cast<std::size_t>(batch) * In::size; }
};

}  // namespace etnn::nn
