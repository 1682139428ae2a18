#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// nn::dropout bound to its input: PyTorch's nn.Dropout(p), p = 0.5 by default
// (nn::dropout_with<std::ratio<1, 5>> for p = 0.2). In training mode
//   y = x m / (1 - p),  m_i = [u(seed, i) >= p]      dx = dy m / (1 - p)
// and y = x, dx = dy in eval mode. u is counter_uniform (core/random.hpp): the mask is a function
// of the pass's seed and the element's index, so backward recomputes it (nothing is saved), and
// it is the same whatever the number of threads or the device. Each training pass draws a fresh
// mask from the model's seed (see etnn::Model::next_run). dx may be dy (in place).
#include <cstddef>
#include <cstdint>
#include <ratio>

#include "../core/config.hpp"
#include "../core/random.hpp"
#include "checks.hpp"
#include "../backend/executor.hpp"
#include "layer.hpp"

namespace etnn::nn {

namespace detail {
// out[i] = in[i] m_i / (1 - p) (forward: in = x; backward: in = dy), or in[i] in eval mode.
template <class T>
struct DropoutMask {
  double p;
  T scale;  // 1 / (1 - p)
  std::uint64_t seed;
  const T* in;
  T* out;
  bool training;
  ETNN_HD void operator()(std::size_t i) const {
    out[i] = !training ? in[i] : counter_uniform(seed, i) >= p ? in[i] * scale : T(0);
  }
};
}  // namespace detail

template <ShapeType In, class P, int Index>
struct DropoutLayer : InPlaceLayer<In, Index> {
  static_assert(check::dropout_probability<P::num, P::den>());
  static constexpr double p = static_cast<double>(P::num) / static_cast<double>(P::den);
  static constexpr bool cuda_kernels = true;  // for_each_index on the device
  static constexpr bool draws_random = true;  // a new mask every training pass

  template <class T, class Device>
  static void forward(Device device, const Pass<T>& pass, const T*, const T* x, T* y, T*, int batch) {
    apply(device, pass, x, y, batch);
  }

  template <class T, class Device>
  static void backward(Device device, const Pass<T>& pass, const T*, T*, const T*, const T*, const T*, T* dy, T* dx,
                       int batch) {
    apply(device, pass, dy, dx, batch);
  }

 private:
  template <class T, class Device>
  static void apply(Device device, const Pass<T>& pass, const T* in, T* out, int batch) {
    const T scale = static_cast<T>(1.0 / (1.0 - p));
    // About 4 operations per element: a hash, a compare, a multiply, a store.
    for_each_index(device, static_cast<std::size_t>(batch) * In::size, 4,
                   detail::DropoutMask<T>{p, scale, pass.seed, in, out, pass.training});
  }
};

}  // namespace etnn::nn
