#pragma once
// A user-defined layer, written outside the library: PyTorch's nn.PReLU(num_parameters=C, init=0.25),
// one learnable slope per channel, the first dimension of the sample (a feature after a linear
// layer, a channel of a (C, H, W) image).
//   y = max(0, x) + a_c min(0, x)         x, y: (B, C, S...)   a ("weight"): (C)
//   dL/dx = dL/dy (x > 0 ? 1 : a_c)
//   dL/da_c += sum over b and S... of dL/dy min(0, x)
// Two types make a layer: the spec a network is written with (`custom::prelu`, deriving from
// nn::LayerSpec so that `>>` takes it) and the layer it binds to once the network knows its input
// shape and position (PReLULayer, a model of the etnn::nn::Layer concept, nn/layer.hpp).
//   constexpr auto net = nn::input<784> >> nn::linear<256> >> custom::prelu >> nn::linear<10>;
#include <algorithm>
#include <array>
#include <cstddef>
#include <ratio>
#include <string>
#include <type_traits>

#include <etnn/etnn.hpp>

namespace custom {

// The layer: In is the per-sample input shape, Init the initial slope, Index the module's position
// in the network (its parameters are named "<Index>.weight").
template <etnn::ShapeType In, class Init, int Index>
struct PReLULayer {
  static constexpr int channels = In::dims[0];
  static constexpr std::size_t spatial = In::size / static_cast<std::size_t>(channels);  // 1 for a flat input

  using in_shape = In;
  using out_shape = In;                         // elementwise: the shape is kept
  static constexpr int module_index = Index;
  static constexpr std::size_t num_params = channels;
  // One tensor, PyTorch's name and layout: "weight" of shape (C), at offset 0 of the layer's slice.
  static constexpr std::array<etnn::nn::ParamInfo, 1> params{{{"weight", 1, {channels, 0, 0, 0}, 0}}};
  static constexpr std::size_t saved_per_sample = 0;  // backward needs only x, which is kept anyway
  static constexpr bool output_aliases_input = false;
  static constexpr bool backward_in_place = true;     // dx[i] depends on dy[i] alone

  // PyTorch: every slope starts at `init` (0.25); the generator is not needed.
  template <class T>
  static void init(T* a, etnn::Rng&) {
    std::fill_n(a, channels, static_cast<T>(Init::num) / static_cast<T>(Init::den));
  }

  // y = x > 0 ? x : a_c x, elementwise over the B C S values; pass.training does not matter here.
  // etnn::for_each_index runs f(i) for i < n on the device's threads (OpenMP on the CPU).
  template <class T, class Device>
  static void forward(Device device, const etnn::nn::Pass<T>&, const T* a, const T* x, T* y, T*, int batch) {
    etnn::for_each_index(device, elements(batch), [=](std::size_t i) {
      y[i] = x[i] > T(0) ? x[i] : a[channel_of(i)] * x[i];
    });
  }

  // Parameter gradients accumulate (+=) into g: the trainer may sum several micro-batches.
  // dx is null when no layer before this one has parameters; otherwise it may equal dy, so the
  // slope gradients are summed from dy before dx is written.
  template <class T, class Device>
  static void backward(Device device, const etnn::nn::Pass<T>&, const T* a, T* g, const T* x, const T*, const T*,
                       T* dy, T* dx, int batch) {
    // da_c += sum_{b, s} dy[b, c, s] min(0, x[b, c, s]): one thread per channel, no races.
    etnn::for_each_index(device, static_cast<std::size_t>(channels), [=](std::size_t c) {
      T sum = 0;
      for (int b = 0; b < batch; ++b) {
        const std::size_t row = (static_cast<std::size_t>(b) * channels + c) * spatial;
        for (std::size_t s = 0; s < spatial; ++s)
          if (x[row + s] < T(0)) sum += dy[row + s] * x[row + s];
      }
      g[c] += sum;
    });
    if (dx == nullptr) return;
    // dx = dy (.) (x > 0 ? 1 : a_c)
    etnn::for_each_index(device, elements(batch), [=](std::size_t i) {
      dx[i] = x[i] > T(0) ? dy[i] : a[channel_of(i)] * dy[i];
    });
  }

 private:
  static std::size_t elements(int batch) { return static_cast<std::size_t>(batch) * In::size; }
  static std::size_t channel_of(std::size_t i) { return i / spatial % static_cast<std::size_t>(channels); }
};

// The spec: what `>>` composes. bind<In, Index> is the layer for input shape In at position Index;
// describe() names it in Net::describe() and etnn::summary<Net>().
template <class Init = std::ratio<1, 4>>
struct PReLU : etnn::nn::LayerSpec {
  template <etnn::ShapeType In, int Index>
  using bind = PReLULayer<In, Init, Index>;
  static std::string describe() {
    if constexpr (std::is_same_v<typename Init::type, std::ratio<1, 4>>) {
      return "prelu";
    } else {
      std::string s = "prelu<";
      s += std::to_string(Init::num);
      s += '/';
      s += std::to_string(Init::den);
      s += '>';
      return s;
    }
  }
};

// Initial slope 0.25 as PyTorch; another one: custom::prelu_with<std::ratio<1, 10>>.
inline constexpr PReLU<> prelu{};
template <class Init>
inline constexpr PReLU<Init> prelu_with{};

// The executor accepts any type that models the concept; checking it here gives the error at the
// layer rather than deep inside the network.
static_assert(etnn::nn::Layer<PReLULayer<etnn::Shape<3, 4, 4>, std::ratio<1, 4>, 0>>);

}  // namespace custom
