#pragma once
// nn::dropout bound to its input: PyTorch's nn.Dropout(p), p = 0.5 by default
// (nn::dropout_with<std::ratio<1, 5>> for p = 0.2). Active in training mode only; each training
// pass draws a fresh mask from the model's seed (see etnn::Model::next_run).
#include <ratio>

#include "../core/static_checks.hpp"
#include "../cpu/dropout.hpp"
#include "layer.hpp"

namespace etnn::nn {

template <ShapeType In, class P, int Index>
struct DropoutLayer : InPlaceLayer<In, Index> {
  static_assert(check::dropout_probability<P::num, P::den>());
  static constexpr double p = static_cast<double>(P::num) / static_cast<double>(P::den);

  template <class T, class Device>
  static void forward(Device device, const Pass<T>& pass, const T*, const T* x, T* y, T*, int batch) {
    dropout_apply(device, p, pass.seed, x, y, elements(batch), pass.training);
  }

  template <class T, class Device>
  static void backward(Device device, const Pass<T>& pass, const T*, T*, const T*, const T*, const T*, T* dy, T* dx,
                       int batch) {
    dropout_apply(device, p, pass.seed, dy, dx, elements(batch), pass.training);
  }

 private:
  static std::size_t elements(int batch) { return static_cast<std::size_t>(batch) * In::size; }
};

}  // namespace etnn::nn
