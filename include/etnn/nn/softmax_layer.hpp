#pragma once
// nn::softmax and nn::log_softmax over a flat input: PyTorch's nn.Softmax(dim=1) and
// nn.LogSoftmax(dim=1).   x, y: (B, N)
#include <type_traits>

#include "../core/static_checks.hpp"
#include "../cpu/softmax.hpp"
#include "layer.hpp"

namespace etnn::nn {

template <ShapeType In, class Kind, int Index>
struct SoftmaxLayer : InPlaceLayer<In, Index> {
  static_assert(check::softmax_input<In>());
  static constexpr int width = static_cast<int>(In::size);

  template <class T, class Device>
  static void forward(Device device, const Pass<T>&, const T*, const T* x, T* y, T*, int batch) {
    softmax_forward<width>(device, Kind{}, x, y, batch);
  }

  template <class T, class Device>
  static void backward(Device device, const Pass<T>&, const T*, T*, const T*, const T* y, const T*, T* dy, T* dx,
                       int batch) {
    softmax_backward<width>(device, Kind{}, y, dy, dx, batch);
  }
};

}  // namespace etnn::nn
