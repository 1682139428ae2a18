// EXPECT: ETNN_DEVICE_LAYER
// Every built-in layer has CUDA kernels; a layer written outside the library has them only when it
// says so (`static constexpr bool cuda_kernels = true`). This one does not, so a device model of a
// network using it must not compile.
#include <etnn/etnn.hpp>

#include <cstddef>
#include <string>

namespace nn = etnn::nn;

// y = 2 x, on the host only.
template <etnn::ShapeType In, int Index>
struct DoubleLayer : nn::InPlaceLayer<In, Index> {
  template <class T, class Device>
  static void forward(Device, const nn::Pass<T>&, const T*, const T* x, T* y, T*, int batch) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(batch) * In::size; ++i) y[i] = 2 * x[i];
  }
  template <class T, class Device>
  static void backward(Device, const nn::Pass<T>&, const T*, T*, const T*, const T*, const T*, T* dy, T* dx,
                       int batch) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(batch) * In::size; ++i) dx[i] = 2 * dy[i];
  }
};
struct Double : nn::LayerSpec {
  template <etnn::ShapeType In, int Index>
  using bind = DoubleLayer<In, Index>;
  static std::string describe() { return "double"; }
};
inline constexpr Double twice{};

#ifdef ETNN_CONTROL
using Device = etnn::Cpu;
#else
using Device = etnn::Cuda;
#endif
int main() { etnn::Model<decltype(nn::input<4> >> nn::linear<4> >> twice >> nn::linear<2>), float, Device> m(0); }
