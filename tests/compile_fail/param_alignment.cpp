// EXPECT: ETNN_PARAM_ALIGNMENT
// A layer of one's own whose bias follows its weight directly, as the flat layout was before every
// tensor started on a 256-byte boundary.
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;

// y = a (.) x + b, per feature
template <etnn::ShapeType In, int Index>
struct AffineLayer {
  static constexpr int width = static_cast<int>(In::size);
  using in_shape = In;
  using out_shape = In;
  static constexpr int module_index = Index;
  static constexpr std::size_t saved_per_sample = 0;
  static constexpr bool output_aliases_input = false;
  static constexpr bool backward_in_place = false;
#ifdef ETNN_CONTROL
  static constexpr auto params = nn::aligned_layout<2>({{{"weight", 1, {width, 0, 0, 0}, 0},
                                                         {"bias", 1, {width, 0, 0, 0}, 0}}});
  static constexpr std::size_t num_params = nn::slice_values(params);
#else
  static constexpr std::array<nn::ParamInfo, 2> params{{{"weight", 1, {width, 0, 0, 0}, 0},
                                                        {"bias", 1, {width, 0, 0, 0}, std::size_t{width}}}};
  static constexpr std::size_t num_params = 2 * std::size_t{width};
#endif
  template <class T>
  static void init(T*, etnn::Rng&) {}
  template <class T, class Device>
  static void forward(Device, const nn::Pass<T>&, const T*, const T*, T*, T*, int) {}
  template <class T, class Device>
  static void backward(Device, const nn::Pass<T>&, const T*, T*, const T*, const T*, const T*, T*, T*, int) {}
};
struct Affine : nn::LayerSpec {
  template <etnn::ShapeType In, int Index>
  using bind = AffineLayer<In, Index>;
  static std::string describe() { return "affine"; }
};

constexpr auto net = nn::input<3> >> Affine{};
int main() { etnn::Model<decltype(net)> model; }
