// Every parameter, gradient, buffer and workspace region starts on a 256-byte boundary
// (core/alignment.hpp), as cuBLASLt and tensor-core loads want on a GPU. The tensors' offsets are
// checked at compile time for every network (nn/program.hpp's ETNN_PARAM_ALIGNMENT); here a probe
// layer, spliced into networks of every kind of layer, checks every pointer the executor hands it
// in training and in inference, at batches that are not multiples of anything.
#include <doctest/doctest.h>

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include <etnn/etnn.hpp>

#include "support/gradcheck.hpp"

namespace nn = etnn::nn;

namespace {

// The pointers a probe was handed, and which of them were not aligned (by role).
struct Seen {
  static inline int pointers = 0;
  static inline std::string misaligned;  // their roles, one per line
  static void check(const void* p, const char* role) {
    ++pointers;
    if (!etnn::region_aligned(p)) (misaligned += role) += '\n';
  }
};

// y = x. Odd sizes everywhere: 3 weights, 5 biases, 1 buffer, 3 saved values per sample, 7 scratch
// values per sample, so that nothing lines up by accident.
template <etnn::ShapeType In, int Index>
struct ProbeLayer {
  using in_shape = In;
  using out_shape = In;
  static constexpr int module_index = Index;
  static constexpr auto params = nn::aligned_layout<2>({{{"weight", 1, {3, 0, 0, 0}, 0}, {"bias", 1, {5, 0, 0, 0}, 0}}});
  static constexpr std::size_t num_params = nn::slice_values(params);
  static constexpr auto buffers = nn::aligned_layout<1>({{{"seen", 1, {1, 0, 0, 0}, 0}}});
  static constexpr std::size_t num_buffers = nn::slice_values(buffers);
  static constexpr std::size_t saved_per_sample = 3;
  static constexpr bool output_aliases_input = false;
  static constexpr bool backward_in_place = false;
  static constexpr std::size_t scratch_values(int batch) { return 7 * static_cast<std::size_t>(batch); }

  template <class T>
  static void init(T* p, etnn::Rng&) {
    std::fill_n(p, 3, T(1));
  }
  template <class T>
  static void init_buffers(T*) {}

  template <class T, class Device>
  static void forward(Device, const nn::Pass<T>& pass, const T* p, const T* x, T* y, T* saved, int batch) {
    Seen::check(p, "parameters");
    Seen::check(p + params[1].offset, "a second parameter tensor");
    Seen::check(pass.buffers, "buffers");
    Seen::check(pass.scratch, "scratch");
    Seen::check(x, "input");
    Seen::check(y, "output");
    if (saved != nullptr) Seen::check(saved, "saved values");
    std::copy_n(x, static_cast<std::size_t>(batch) * In::size, y);
  }

  template <class T, class Device>
  static void backward(Device, const nn::Pass<T>& pass, const T* p, T* g, const T* x, const T* y, const T* saved,
                       T* dy, T* dx, int batch) {
    Seen::check(p, "parameters in backward");
    Seen::check(g, "gradients");
    Seen::check(g + params[1].offset, "a second gradient tensor");
    Seen::check(pass.scratch, "scratch in backward");
    Seen::check(x, "input in backward");
    Seen::check(y, "output in backward");
    Seen::check(saved, "saved values in backward");
    Seen::check(dy, "dL/dy");
    if (dx != nullptr) {
      Seen::check(dx, "dL/dx");
      std::copy_n(dy, static_cast<std::size_t>(batch) * In::size, dx);
    }
  }
};

struct Probe : nn::LayerSpec {
  template <etnn::ShapeType In, int Index>
  using bind = ProbeLayer<In, Index>;
  static std::string describe() { return "probe"; }
};
constexpr Probe probe{};

// The model's arrays and named tensors, then training steps and inference at several batches,
// with every probe checking what it is handed.
template <class Net, class T, class MakeInput>
void check_network(const char* name, MakeInput&& make_input) {
  INFO(name, sizeof(T) == 8 ? " in double" : " in float");
  using Model = etnn::Model<Net, T>;
  Model model(1);
  CHECK(etnn::region_aligned(model.parameters()));
  CHECK(etnn::region_aligned(model.gradients()));
  if (Model::num_buffers > 0) CHECK(etnn::region_aligned(model.buffers()));
  for (const auto& p : Model::named_parameters()) {
    INFO(p.name);
    CHECK(p.offset * sizeof(T) % etnn::region_alignment_bytes == 0);
    CHECK(p.offset + p.numel <= Model::flat_size);
  }
  for (const auto& b : Model::named_buffers()) {
    INFO(b.name);
    CHECK(b.offset * sizeof(T) % etnn::region_alignment_bytes == 0);
  }
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.01f});
  etnn::Trainer trainer(model, loss, opt);
  Seen::pointers = 0;
  Seen::misaligned.clear();
  for (const int batch : {1, 37, 5, 64}) {
    INFO("batch ", batch);
    const auto x = make_input(batch);
    std::vector<int> y;
    for (int b = 0; b < batch; ++b) y.push_back(b % Net::output_shape::size);
    trainer.step(x, y);
    (void)model.forward(x);
  }
  CHECK(Seen::pointers > 0);
  CHECK(Seen::misaligned == "");
  // The zeros between tensors are still zero after training.
  std::vector<bool> in_tensor(Model::flat_size, false);
  for (const auto& p : Model::named_parameters()) std::fill_n(in_tensor.begin() + p.offset, p.numel, true);
  int nonzero = 0;
  for (std::size_t i = 0; i < Model::flat_size; ++i)
    nonzero += !in_tensor[i] && (model.parameters()[i] != 0 || model.gradients()[i] != 0);
  CHECK(nonzero == 0);
}

template <class Shape, class T>
auto features(int batch) {
  etnn::Tensor<T, Shape> x(batch);
  etnn::test::fill_uniform(x.data(), x.size(), 7, 1.0);
  return x;
}

template <class Net, class T>
void check_features_network(const char* name) {
  check_network<Net, T>(name, [](int batch) { return features<typename Net::input_shape, T>(batch); });
}

template <class T>
void check_every_kind() {
  check_features_network<decltype(nn::input<37> >> probe >> nn::linear<19> >> nn::relu >> probe >> nn::linear<5>), T>(
      "linear");
  check_features_network<decltype(nn::input<3, 9, 9> >> nn::conv2d<5, 3> >> nn::relu >> probe >> nn::batch_norm >>
                                  nn::max_pool2d<2> >> nn::flatten >> probe >> nn::linear<7>),
                         T>("conv2d, batch_norm, pooling");
  check_features_network<decltype(nn::input<12> >> nn::linear<20> >> nn::residual(probe >> nn::linear<20>) >>
                                  nn::concat(probe >> nn::linear<3>, nn::linear<5>) >> probe >> nn::linear<4>),
                         T>("residual and concat");
  check_features_network<decltype(nn::input<9, 6> >> nn::conv1d<10, 3> >> probe >> nn::multi_head_attention<2, true> >>
                                  probe >> nn::layer_norm >> nn::flatten >> nn::linear<3>),
                         T>("conv1d, attention, layer_norm");
  using TokenNet = decltype(nn::input_tokens<7, 11> >> nn::embedding<16> >> nn::positional_embedding >> probe >>
                          nn::flatten >> nn::linear<3>);
  check_network<TokenNet, T>("embedding", [](int batch) {
    etnn::Tensor<T, etnn::Tokens<7, 11>> ids(batch);
    for (std::size_t i = 0; i < ids.size(); ++i) ids.data()[i] = static_cast<T>(i * 5 % 11);
    return ids;
  });
}

}  // namespace

TEST_CASE("every parameter, gradient, buffer and workspace region starts on a 256-byte boundary") {
  check_every_kind<float>();
  check_every_kind<double>();
}

TEST_CASE("workspace regions reserve a multiple of 64 values per sample; the tensors' offsets are aligned") {
  static_assert(etnn::aligned_values(0) == 0 && etnn::aligned_values(1) == 64 && etnn::aligned_values(64) == 64 &&
                etnn::aligned_values(65) == 128);
  using Net = decltype(nn::input<10> >> nn::linear<3> >> nn::relu >> nn::linear<2>);
  using program = etnn::Model<Net>::program;
  // Two outputs (3 and 2 wide) and two gradient buffers (10 wide), 64 values each per sample.
  CHECK(program::workspace_per_sample == 4 * 64);
  CHECK(program::workspace_values(37) == 4 * 64 * 37);
  CHECK(program::inference_values(5) == 2 * 64 * 5);
  // Widths that are multiples of 64 are laid out without gaps.
  using Wide = decltype(nn::input<128> >> nn::linear<256> >> nn::relu >> nn::linear<64>);
  CHECK(etnn::Model<Wide>::program::workspace_per_sample == 256 + 64 + 2 * 256);
  // linear<3>: a weight of 30 and a bias of 3, each from a multiple of 64; linear<2> likewise.
  CHECK(Net::num_params == 10 * 3 + 3 + 3 * 2 + 2);
  CHECK(Net::flat_size == 4 * 64);
  CHECK(program::param_ends == std::array<std::size_t, 2>{128, 256});
}
