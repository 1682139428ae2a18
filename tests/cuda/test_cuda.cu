// The CUDA backend, its host side and its kernels. Host-side cases run everywhere (device choice
// and fallback, launch and tiling arithmetic, which layers have kernels, which networks fuse);
// device cases compare each CUDA kernel with the CPU path, and are reported as skipped where no
// usable GPU is present (whole training runs: test_cuda_training.cu, the same test binary).
// Parity: fp32 within 1e-4 elementwise (1e-3 for GEMM-sized reductions), fp64 within 1e-12.
#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "cuda/cuda_test_support.hpp"

using namespace cuda_test;

// ---- Host side: no device needed --------------------------------------------------------------

TEST_CASE("best_device answers CUDA exactly when a usable GPU is present, and says why not once") {
  const std::string why = etnn::cuda::detail::cuda_unavailable_reason();
  CHECK((etnn::best_device() == etnn::DeviceKind::cuda) == why.empty());
  if (!why.empty()) MESSAGE("no GPU here: " << why);
}

TEST_CASE("dispatch to CUDA without a usable GPU throws UnavailableError naming the reason") {
  if (gpu()) {
    CHECK(etnn::dispatch(etnn::DeviceKind::cuda, []<class D>(D) { return std::string(D::name); }) == "cuda");
    return;
  }
  try {
    etnn::dispatch(etnn::DeviceKind::cuda, []<class D>(D) { return 0; });
    FAIL("dispatch did not throw");
  } catch (const etnn::UnavailableError& e) {
    const std::string message = e.what();
    CHECK(message.find("the CUDA device was requested but") != std::string::npos);
    CHECK(message.find(etnn::cuda::detail::cuda_unavailable_reason()) != std::string::npos);
  }
  CHECK(etnn::dispatch(etnn::DeviceKind::cpu, []<class D>(D) { return std::string(D::name); }) == "cpu");
}

TEST_CASE("grid-stride launches cover any size with a bounded grid") {
  CHECK(etnn::cuda::grid_blocks(0) == 1);
  CHECK(etnn::cuda::grid_blocks(1) == 1);
  CHECK(etnn::cuda::grid_blocks(256) == 1);
  CHECK(etnn::cuda::grid_blocks(257) == 2);
  CHECK(etnn::cuda::grid_blocks(std::size_t{1} << 28) == 1u << 20);
  CHECK(etnn::cuda::grid_blocks(std::size_t{1} << 40) == 1u << 20);
}

TEST_CASE("bias-gradient row chunks cover the batch exactly once") {
  for (int batch : {1, 7, 64, 255, 256, 257, 4096, 12345, 1 << 18, 1 << 22}) {
    const auto chunks = etnn::cuda::detail::row_chunks(batch);
    CAPTURE(batch);
    CHECK(chunks.count >= 1);
    CHECK(chunks.count <= 512);
    CHECK(static_cast<long long>(chunks.count) * chunks.rows >= batch);           // every row in a chunk
    CHECK(static_cast<long long>(chunks.count - 1) * chunks.rows < batch);        // no empty chunk
  }
}

namespace {
// covering() against brute force: the output rows whose window contains each input row.
template <int H, int K, int S, int P>
void check_covering() {
  using G = etnn::expr::Window<1, H, H, K, S, P>;
  for (int in = 0; in < H; ++in) {
    int first = 0, last = 0;
    etnn::cuda::detail::covering<G>(in, G::out_height, first, last);
    for (int o = 0; o < G::out_height; ++o) {
      bool covers = false;
      for (int k = 0; k < K; ++k) covers = covers || G::in_row(o, k) == in;
      CAPTURE(in);
      CAPTURE(o);
      CHECK(covers == (o >= first && o <= last));
    }
  }
}
}  // namespace

TEST_CASE("pooling's backward gathers from exactly the windows that cover an input") {
  check_covering<8, 2, 2, 0>();
  check_covering<9, 3, 2, 1>();
  check_covering<7, 3, 3, 1>();
  check_covering<10, 3, 1, 1>();
  check_covering<11, 5, 2, 2>();
  check_covering<6, 1, 2, 0>();
}

namespace {
// A layer of a user's own with no CUDA kernels: y = x.
template <etnn::ShapeType In, int Index>
struct HostOnlyLayer : nn::InPlaceLayer<In, Index> {
  template <class T, class Device>
  static void forward(Device, const nn::Pass<T>&, const T*, const T* x, T* y, T*, int batch) {
    std::copy_n(x, static_cast<std::size_t>(batch) * In::size, y);
  }
  template <class T, class Device>
  static void backward(Device, const nn::Pass<T>&, const T*, T*, const T*, const T*, const T*, T* dy, T* dx,
                       int batch) {
    std::copy_n(dy, static_cast<std::size_t>(batch) * In::size, dx);
  }
};
struct HostOnly : nn::LayerSpec {
  template <etnn::ShapeType In, int Index>
  using bind = HostOnlyLayer<In, Index>;
  static std::string describe() { return "host_only"; }
};
}  // namespace

TEST_CASE("which layers have CUDA kernels is known at compile time: every built-in one, a custom one if it says so") {
  using Mlp = decltype(nn::input<8> >> nn::linear<4> >> nn::gelu >> nn::flatten >> nn::linear<2>);
  using Cnn = decltype(nn::input<1, 8, 8> >> nn::conv2d<2, 3> >> nn::max_pool2d<2> >> nn::flatten >> nn::linear<2>);
  using Custom = decltype(nn::input<8> >> nn::linear<4> >> HostOnly{} >> nn::linear<2>);
  using CustomInside = decltype(nn::input<8> >> nn::residual(nn::linear<8> >> HostOnly{}) >> nn::linear<2>);
  static_assert(nn::detail::Program<typename Mlp::layers>::runs_on<etnn::Cuda>);
  static_assert(nn::detail::Program<typename Cnn::layers>::runs_on<etnn::Cuda>);
  static_assert(nn::detail::Program<typename EveryLayer::layers>::runs_on<etnn::Cuda>);
  static_assert(nn::detail::Program<typename SequenceLayers::layers>::runs_on<etnn::Cuda>);
  static_assert(nn::detail::Program<typename TokenLayers::layers>::runs_on<etnn::Cuda>);
  static_assert(!nn::detail::Program<typename Custom::layers>::runs_on<etnn::Cuda>);
  static_assert(!nn::detail::Program<typename CustomInside::layers>::runs_on<etnn::Cuda>);  // through a combinator
  static_assert(nn::detail::Program<typename Custom::layers>::runs_on<etnn::Cpu>);
  // Dropout, also inside a combinator, makes every training pass differ: no graphs for it.
  using DropoutInside = decltype(nn::input<8> >> nn::concat(nn::linear<4>, nn::linear<4> >> nn::dropout) >>
                                 nn::linear<2>);
  static_assert(nn::detail::Program<typename EveryLayer::layers>::draws_random);
  static_assert(nn::detail::Program<typename DropoutInside::layers>::draws_random);
  static_assert(!nn::detail::Program<typename Normalised::layers>::draws_random);
  // Losses keep device scratch in a CUDA build, and stay copyable as on the host.
  static_assert(std::is_copy_constructible_v<etnn::loss::CrossEntropy>);
  static_assert(std::is_copy_assignable_v<etnn::loss::MultiMargin>);
  CHECK(Custom::describe().find("host_only") != std::string::npos);
}

TEST_CASE("a CUDA build trains on the CPU through best_device when no GPU is present") {
  using Net = decltype(nn::input<4> >> nn::linear<8> >> nn::relu >> nn::linear<3>);
  const auto x = random_values<float>(16 * 4, 1);
  std::vector<int> y(16);  // the largest of a sample's first three features: learnable
  for (std::size_t i = 0; i < 16; ++i)
    y[i] = static_cast<int>(std::max_element(x.begin() + 4 * i, x.begin() + 4 * i + 3) - (x.begin() + 4 * i));
  const float loss = etnn::dispatch(etnn::best_device(), [&]<class Device>(Device) {
    etnn::Model<Net, float, Device> model(0);
    etnn::loss::CrossEntropy ce;
    etnn::optim::SGD opt(model, {.lr = 0.1f});
    etnn::Trainer trainer(model, ce, opt);
    float last = 0;
    for (int i = 0; i < 100; ++i) last = trainer.step(etnn::TensorView<const float, etnn::Shape<4>>(x.data(), 16), y);
    return last;
  });
  CHECK(std::isfinite(loss));
  CHECK(loss < 0.75f);  // from ln 3 = 1.10
}

namespace {
template <class Net>
constexpr bool fusable = []<class... Ls>(etnn::TypeList<Ls...>) {
  return nn::detail::fusable_mlp<Ls...>();
}(typename Net::layers{});
}  // namespace

TEST_CASE("which networks the fully fused kernels take (etnn::bf16, etnn::fp16) is decided at compile time") {
  static_assert(fusable<decltype(nn::input<64> >> nn::linear<64> >> nn::relu >> nn::linear<16>)>);
  static_assert(fusable<decltype(nn::input<16> >> nn::linear<128> >> nn::relu >> nn::linear<32> >> nn::relu >>
                                 nn::linear<128>)>);
  static_assert(fusable<decltype(nn::input<32> >> nn::linear<16>)>);
  static_assert(fusable<decltype(nn::input<20> >> nn::linear<48> >> nn::relu >> nn::linear<10>)>);  // padded
  static_assert(!fusable<decltype(nn::input<784> >> nn::linear<64> >> nn::relu >> nn::linear<16>)>);  // input 784
  static_assert(!fusable<decltype(nn::input<64> >> nn::linear<200> >> nn::relu >> nn::linear<16>)>);  // width 200
  // One activation between the layers, ReLU, tanh or SiLU (expr::detail::fused_hidden); not two kinds,
  // not one the kernels lack, not none.
  static_assert(fusable<decltype(nn::input<64> >> nn::linear<64> >> nn::tanh >> nn::linear<16>)>);
  static_assert(fusable<decltype(nn::input<20> >> nn::linear<48> >> nn::silu >> nn::linear<64> >> nn::silu >>
                                 nn::linear<10>)>);
  static_assert(!fusable<decltype(nn::input<64> >> nn::linear<64> >> nn::relu >> nn::linear<64> >> nn::tanh >>
                                  nn::linear<16>)>);
  static_assert(!fusable<decltype(nn::input<64> >> nn::linear<64> >> nn::sigmoid >> nn::linear<16>)>);
  static_assert(!fusable<decltype(nn::input<64> >> nn::linear<64> >> nn::gelu >> nn::linear<16>)>);
  static_assert(!fusable<decltype(nn::input<64> >> nn::linear<64> >> nn::linear<16>)>);
  static_assert(!fusable<decltype(nn::input<64> >> nn::linear<64> >> nn::relu >> nn::linear<16> >> nn::relu)>);
  using Small = decltype(nn::input<64> >> nn::linear<64> >> nn::relu >> nn::linear<16>);
  using Large = decltype(nn::input<784> >> nn::linear<64> >> nn::relu >> nn::linear<16>);
  using Fused = etnn::Model<Small, etnn::bf16, etnn::Cuda>;
  static_assert(std::is_same_v<Fused::value_type, float>);  // fp32 master parameters
  static_assert(Fused::num_params == 64 * 64 + 64 + 16 * 64 + 16);
  // etnn::bf16 and etnn::fp16 take the fused kernels where they fit (in their own 16-bit format),
  // the per-layer path elsewhere or when forced.
  static_assert(std::is_same_v<Fused::program, nn::detail::FusedMlpProgram<Small::layers, __nv_bfloat16>>);
  static_assert(std::is_same_v<etnn::Model<Small, etnn::fp16, etnn::Cuda>::program,
                               nn::detail::FusedMlpProgram<Small::layers, __half>>);
  static_assert(std::is_same_v<etnn::Model<Large, etnn::fp16, etnn::Cuda>::program,
                               nn::detail::SplitMlpProgram<Large::layers, __half>>);
  static_assert(std::is_same_v<etnn::Model<Large, etnn::fp16_unfused, etnn::Cuda>::program,
                               nn::detail::Program<Large::layers>>);
  static_assert(std::is_same_v<etnn::Model<Small, etnn::fp16_unfused, etnn::Cuda>::program,
                               nn::detail::Program<Small::layers>>);
  static_assert(etnn::products_of<etnn::fp16_unfused> == etnn::Products::fp16 &&
                etnn::products_of<etnn::bf16> == etnn::Products::bf16 &&
                etnn::products_of<float> == etnn::Products::own);
  static_assert(etnn::loss_scaled_by_default<etnn::fp16> && !etnn::loss_scaled_by_default<etnn::bf16>);
  // A wide first layer before a tail the fused kernels take: that layer on its own, the tail fused.
  static_assert(std::is_same_v<etnn::Model<Large, etnn::bf16, etnn::Cuda>::program,
                               nn::detail::SplitMlpProgram<Large::layers, __nv_bfloat16>>);
  using WideTail = decltype(nn::input<784> >> nn::linear<256> >> nn::relu >> nn::linear<64> >> nn::relu >>
                            nn::linear<10>);  // the tail's input, 256, is too wide
  static_assert(std::is_same_v<etnn::Model<WideTail, etnn::bf16, etnn::Cuda>::program,
                               nn::detail::Program<WideTail::layers>>);
  static_assert(std::is_same_v<etnn::Model<Large, float, etnn::Cuda>::program, nn::detail::Program<Large::layers>>);
  static_assert(std::is_same_v<etnn::Model<Small, etnn::bf16_unfused, etnn::Cuda>::program,
                               nn::detail::Program<Small::layers>>);
  static_assert(std::is_same_v<etnn::Model<Large, etnn::bf16, etnn::Cuda>::value_type, float>);
  // Any network at all: every kind of layer asks the fused kernels' rule and gets the per-layer path.
  static_assert(std::is_same_v<etnn::Model<EveryLayer, etnn::bf16, etnn::Cuda>::program,
                               nn::detail::Program<EveryLayer::layers>>);
  CHECK(true);
}

TEST_CASE("a graph cache that is off runs the work every time and records nothing") {
  etnn::cuda::GraphCache graphs("turned off");
  int calls = 0;
  for (int i = 0; i < 3; ++i) graphs.run({0, 64, nullptr}, [&] { ++calls; });
  CHECK(calls == 3);
  CHECK(graphs.recorded() == 0);
  CHECK(graphs.launches() == 0);
  CHECK_FALSE(graphs.enabled());
  CHECK(graphs.reason() == "turned off");
}

// ---- Device: CUDA against the CPU -------------------------------------------------------------

TEST_CASE_TEMPLATE("expression executor, fill and for_each_index match the host" * doctest::skip(!gpu()), T, float,
                   double) {
  const std::size_t n = 100003;
  const auto a = random_values<T>(n, 2), b = random_values<T>(n, 3);
  auto da = to_device(a), db = to_device(b);
  etnn::Buffer<T, etnn::Cuda> out(n);
  using namespace etnn::expr;
  etnn::assign(etnn::Cuda{}, out.data(),
               apply<etnn::fn::Gelu>(ref(da.data(), n)) * ref(db.data(), n) + scalar(T(0.5)));
  std::vector<T> expected(n);
  etnn::assign(etnn::Cpu{}, expected.data(), apply<etnn::fn::Gelu>(ref(a.data(), n)) * ref(b.data(), n) + scalar(T(0.5)));
  CHECK(max_relative_error(to_host(out), expected) <= tolerance<T>);
  etnn::fill(etnn::Cuda{}, out.data(), n, T(3));
  const auto filled = to_host(out);
  CHECK(std::all_of(filled.begin(), filled.end(), [](T v) { return v == T(3); }));
}

TEST_CASE_TEMPLATE("device reductions: sum of squares and the non-finite search" * doctest::skip(!gpu()), T, float,
                   double) {
  const std::size_t n = 1000001;
  auto v = random_values<T>(n, 4);
  double expected = 0;
  for (T x : v) expected += static_cast<double>(x) * static_cast<double>(x);
  auto dv = to_device(v);
  CHECK(etnn::backend::sum_of_squares(etnn::Cuda{}, dv.data(), n) == doctest::Approx(expected).epsilon(1e-12));
  CHECK(etnn::backend::last_non_finite(etnn::Cuda{}, dv.data(), n) == n);
  v[17] = std::numeric_limits<T>::quiet_NaN();
  v[99999] = std::numeric_limits<T>::infinity();
  dv = to_device(v);
  CHECK(etnn::backend::last_non_finite(etnn::Cuda{}, dv.data(), n) == 99999);
  CHECK(etnn::backend::first_non_finite(etnn::Cuda{}, dv.data(), 0, n) == 17);
  CHECK(etnn::backend::first_non_finite(etnn::Cuda{}, dv.data(), 18, n) == 99999);
  CHECK(etnn::backend::first_non_finite(etnn::Cuda{}, dv.data(), 18, 99999) == 99999);
}

namespace {
// A dense layer forward and backward on both devices, every output compared.
template <class T, int In, int Out, class Act>
void check_dense(int batch, double gemm_tolerance) {
  CAPTURE(In);
  CAPTURE(Out);
  CAPTURE(batch);
  CAPTURE(Act::name);
  const std::size_t rows = static_cast<std::size_t>(batch);
  const auto w = random_values<T>(std::size_t{Out} * In, 5, 1.0 / std::sqrt(In));
  const auto b = random_values<T>(Out, 6, 0.5);
  const auto x = random_values<T>(rows * In, 7);
  const auto dy = random_values<T>(rows * Out, 8);
  const auto g0 = random_values<T>(std::size_t{Out} * In + Out, 9);  // gradients accumulate onto these
  const bool keep_z = Act::derivative_needs_input;

  std::vector<T> y(rows * Out), z(keep_z ? rows * Out : 0), dy_cpu = dy, dx(rows * In), g = g0;
  etnn::dense_forward<In, Out>(etnn::Cpu{}, w.data(), b.data(), x.data(), y.data(), keep_z ? z.data() : nullptr,
                               batch, Act{});
  etnn::dense_backward<In, Out>(etnn::Cpu{}, w.data(), g.data(), g.data() + std::size_t{Out} * In, x.data(), y.data(),
                                keep_z ? z.data() : nullptr, dy_cpu.data(), dx.data(), batch, Act{});

  auto dw = to_device(w), db = to_device(b), dxin = to_device(x), ddy = to_device(dy), dg = to_device(g0);
  etnn::Buffer<T, etnn::Cuda> dev_y(rows * Out), dev_z(z.size()), dev_dx(rows * In);
  etnn::dense_forward<In, Out>(etnn::Cuda{}, dw.data(), db.data(), dxin.data(), dev_y.data(),
                               keep_z ? dev_z.data() : nullptr, batch, Act{});
  etnn::dense_backward<In, Out>(etnn::Cuda{}, dw.data(), dg.data(), dg.data() + std::size_t{Out} * In, dxin.data(),
                                dev_y.data(), keep_z ? dev_z.data() : nullptr, ddy.data(), dev_dx.data(), batch, Act{});
  CHECK(max_relative_error(to_host(dev_y), y) <= gemm_tolerance);
  CHECK(max_relative_error(to_host(ddy), dy_cpu) <= gemm_tolerance);  // dZ, written over dY
  CHECK(max_relative_error(to_host(dev_dx), dx) <= gemm_tolerance);
  CHECK(max_relative_error(to_host(dg), g) <= gemm_tolerance);  // dW and db, accumulated
}
}  // namespace

TEST_CASE_TEMPLATE("dense layers forward and backward match the CPU for every activation" * doctest::skip(!gpu()), T,
                   float, double) {
  const double tol = std::is_same_v<T, float> ? 1e-4 : 1e-12;
  for (int batch : {1, 37, 256, 1000}) {
    check_dense<T, 20, 10, etnn::fn::Identity>(batch, tol);
    check_dense<T, 20, 33, etnn::fn::Relu>(batch, tol);
    check_dense<T, 64, 64, etnn::fn::Tanh>(batch, tol);
    check_dense<T, 64, 16, etnn::fn::Gelu>(batch, tol);
    check_dense<T, 16, 64, etnn::fn::Sigmoid>(batch, tol);
    check_dense<T, 31, 17, etnn::fn::Silu>(batch, tol);
    check_dense<T, 8, 40, etnn::fn::LeakyRelu<>>(batch, tol);
  }
  // K >= 1024: the GEMMs' sums are long.
  check_dense<T, 1024, 64, etnn::fn::Relu>(2048, std::is_same_v<T, float> ? 1e-3 : 1e-12);
}

TEST_CASE_TEMPLATE("a linear layer's relu keeps NaN on the device, as on the CPU" * doctest::skip(!gpu()), T, float,
                   double) {
  // Not cuBLASLt's ReLU epilogue, max(x, 0), which turns NaN into 0 and hides it from the guard.
  constexpr int In = 8, Out = 16, batch = 4;
  const auto w = random_values<T>(std::size_t{Out} * In, 30), b = random_values<T>(Out, 31);
  auto x = random_values<T>(std::size_t{In} * batch, 32);
  x[2 * In + 3] = std::numeric_limits<T>::quiet_NaN();  // in sample 2: every output of its row is NaN
  std::vector<T> y(std::size_t{Out} * batch);
  T* const no_kept = nullptr;  // relu's derivative needs its output only
  etnn::dense_forward<In, Out>(etnn::Cpu{}, w.data(), b.data(), x.data(), y.data(), no_kept, batch, etnn::fn::Relu{});
  auto dw = to_device(w), db = to_device(b), dx = to_device(x);
  etnn::Buffer<T, etnn::Cuda> dev_y(y.size());
  etnn::dense_forward<In, Out>(etnn::Cuda{}, dw.data(), db.data(), dx.data(), dev_y.data(), no_kept, batch,
                               etnn::fn::Relu{});
  const std::vector<T> on_device = to_host(dev_y);
  for (std::size_t i = 0; i < y.size(); ++i) {
    CAPTURE(i);
    CHECK(std::isnan(y[i]) == (i / Out == 2));
    CHECK(std::isnan(on_device[i]) == (i / Out == 2));
  }
}

namespace {
// A convolution forward and backward on both devices, every output compared.
template <class T, int C, int H, int K, int S, int P, int Out, class Act>
void check_conv(int batch) {
  using G = etnn::expr::Window<C, H, H, K, S, P>;
  CAPTURE(C);
  CAPTURE(H);
  CAPTURE(K);
  CAPTURE(S);
  CAPTURE(P);
  CAPTURE(batch);
  constexpr std::size_t depth = C * K * K;
  const std::size_t in = std::size_t{C} * G::in_pixels * batch, out = std::size_t{Out} * G::out_pixels * batch;
  const std::size_t columns = depth * G::out_pixels * batch;
  const auto w = random_values<T>(Out * depth, 20, 1.0 / std::sqrt(double(depth)));
  const auto b = random_values<T>(Out, 21, 0.5);
  const auto x = random_values<T>(in, 22);
  const auto dy = random_values<T>(out, 23);
  const auto g0 = random_values<T>(Out * depth + Out, 24);
  const bool keep_z = Act::derivative_needs_input;
  std::vector<T> y(out), z(keep_z ? out : 0), dy_cpu = dy, dx(in), g = g0;
  std::vector<T> cpu_scratch(etnn::conv2d_scratch_values<G, Out>(etnn::Cpu{}, batch));
  etnn::conv2d_forward<G, Out>(etnn::Cpu{}, w.data(), b.data(), x.data(), y.data(), keep_z ? z.data() : nullptr,
                               cpu_scratch.data(), batch, Act{});
  etnn::conv2d_backward<G, Out>(etnn::Cpu{}, w.data(), g.data(), g.data() + Out * depth, x.data(), y.data(),
                                keep_z ? z.data() : nullptr, dy_cpu.data(), dx.data(), cpu_scratch.data(), batch,
                                Act{});
  auto dw = to_device(w), db = to_device(b), dxin = to_device(x), ddy = to_device(dy), dg = to_device(g0);
  etnn::Buffer<T, etnn::Cuda> dev_y(out), dev_z(z.size()), dev_dx(in), dev_cols(columns);
  etnn::conv2d_forward<G, Out>(etnn::Cuda{}, dw.data(), db.data(), dxin.data(), dev_y.data(),
                               keep_z ? dev_z.data() : nullptr, dev_cols.data(), batch, Act{});
  etnn::conv2d_backward<G, Out>(etnn::Cuda{}, dw.data(), dg.data(), dg.data() + Out * depth, dxin.data(),
                                dev_y.data(), keep_z ? dev_z.data() : nullptr, ddy.data(), dev_dx.data(),
                                dev_cols.data(), batch, Act{});
  CHECK(max_relative_error(to_host(dev_y), y) <= tolerance<T>);
  CHECK(max_relative_error(to_host(dev_dx), dx) <= tolerance<T>);
  CHECK(max_relative_error(to_host(dg), g) <= (std::is_same_v<T, float> ? 1e-3 : 1e-12));  // sums over B P
}

// A pooling layer forward and backward on both devices; integer-valued inputs make ties, which
// must route the same way.
template <class T, class Kind, int H, int K, int S, int P>
void check_pool(int batch) {
  using G = etnn::expr::Window<3, H, H, K, S, P>;
  CAPTURE(H);
  CAPTURE(K);
  CAPTURE(S);
  CAPTURE(P);
  const std::size_t in = std::size_t{3} * G::in_pixels * batch, out = std::size_t{3} * G::out_pixels * batch;
  auto x = random_values<T>(in, 25, 4.0);
  for (auto& v : x) v = std::round(v);
  const auto dy = random_values<T>(out, 26);
  std::vector<T> y(out), dx(in);
  etnn::pool2d_forward<G>(etnn::Cpu{}, Kind{}, x.data(), y.data(), batch);
  etnn::pool2d_backward<G>(etnn::Cpu{}, Kind{}, x.data(), y.data(), dy.data(), dx.data(), batch);
  auto dxin = to_device(x), ddy = to_device(dy);
  etnn::Buffer<T, etnn::Cuda> dev_y(out), dev_dx(in);
  etnn::pool2d_forward<G>(etnn::Cuda{}, Kind{}, dxin.data(), dev_y.data(), batch);
  etnn::pool2d_backward<G>(etnn::Cuda{}, Kind{}, dxin.data(), dev_y.data(), ddy.data(), dev_dx.data(), batch);
  CHECK(to_host(dev_y) == y);    // the same comparisons and sums in the same order: bitwise
  CHECK(to_host(dev_dx) == dx);
}
}  // namespace

TEST_CASE_TEMPLATE("convolution and pooling forward and backward match the CPU" * doctest::skip(!gpu()), T, float,
                   double) {
  for (int batch : {1, 5, 64}) {
    check_conv<T, 1, 28, 5, 1, 2, 6, etnn::fn::Relu>(batch);
    check_conv<T, 6, 14, 5, 1, 0, 16, etnn::fn::Identity>(batch);
    check_conv<T, 3, 9, 3, 2, 1, 8, etnn::fn::Gelu>(batch);
    check_conv<T, 2, 7, 3, 3, 2, 4, etnn::fn::Tanh>(batch);
    check_pool<T, etnn::expr::MaxPooling, 8, 2, 2, 0>(batch);
    check_pool<T, etnn::expr::MaxPooling, 9, 3, 2, 1>(batch);
    check_pool<T, etnn::expr::AveragePooling, 8, 2, 2, 0>(batch);
    check_pool<T, etnn::expr::AveragePooling, 9, 3, 2, 1>(batch);
  }
}

TEST_CASE("LeNet-5 trains on the device as on the CPU" * doctest::skip(!gpu())) {
  using Lenet = decltype(nn::input<1, 28, 28> >> nn::conv2d<6, 5, nn::pad<2>> >> nn::relu >> nn::max_pool2d<2> >>
                         nn::conv2d<16, 5> >> nn::relu >> nn::max_pool2d<2> >> nn::flatten >> nn::linear<120> >>
                         nn::relu >> nn::linear<84> >> nn::relu >> nn::linear<10>);
  const int batch = 32, steps = 5;
  const auto x = random_values<float>(std::size_t{784} * batch, 27);
  std::vector<int> y(batch);
  for (int i = 0; i < batch; ++i) y[static_cast<std::size_t>(i)] = i % 10;
  auto train = [&]<class Device>(Device) {
    etnn::Model<Lenet, float, Device> model(2);
    etnn::loss::CrossEntropy ce;
    etnn::optim::SGD opt(model, {.lr = 0.05f, .momentum = 0.9f});
    etnn::Trainer trainer(model, ce, opt);
    for (int s = 0; s < steps; ++s) trainer.step(etnn::TensorView<const float, etnn::Shape<1, 28, 28>>(x.data(), batch), y);
    std::vector<float> params(Lenet::flat_size);
    etnn::copy_to_host(Device{}, params.data(), model.parameters(), params.size());
    return params;
  };
  CHECK(max_relative_error(train(etnn::Cuda{}), train(etnn::Cpu{})) <= 1e-4);
}

TEST_CASE_TEMPLATE("losses on the device match the CPU: cross-entropy, NLL, multi-margin, the element-wise kernels" *
                       doctest::skip(!gpu()),
                   T, float, double) {
  constexpr int classes = 7;
  const int batch = 300;
  using S = etnn::Shape<classes>;
  const auto logits = random_values<T>(std::size_t{classes} * batch, 10, 5.0);
  std::vector<int> labels(static_cast<std::size_t>(batch));
  for (int i = 0; i < batch; ++i) labels[static_cast<std::size_t>(i)] = (i * 5) % classes;
  auto dlogits = to_device(logits);
  etnn::TensorView<const T, S> host(logits.data(), batch);
  etnn::TensorView<const T, S, etnn::Cuda> device(dlogits.data(), batch);
  const auto check_rows = [&](const auto& loss) {
    std::vector<T> grad(logits.size());
    etnn::Buffer<T, etnn::Cuda> dgrad(logits.size());
    const T expected = loss.value_and_grad(etnn::Cpu{}, host, labels, grad.data());
    const T got = loss.value_and_grad(etnn::Cuda{}, device, labels, dgrad.data());
    CHECK(std::abs(static_cast<double>(got - expected)) <= tolerance<T> * std::max(1.0, std::abs(double(expected))));
    CHECK(max_relative_error(to_host(dgrad), grad) <= tolerance<T>);
  };
  const std::vector<float> class_weights = {1, 2, 0.5f, 1, 1, 3, 0.25f};
  check_rows(etnn::loss::CrossEntropy{});
  check_rows(etnn::loss::CrossEntropy(
      {.reduction = etnn::loss::Reduction::sum, .label_smoothing = 0.1f, .weight = class_weights}));
  check_rows(etnn::loss::NLL{});
  check_rows(etnn::loss::NLL({.weight = class_weights}));
  check_rows(etnn::loss::MultiMargin{});
  check_rows(etnn::loss::MultiMargin({.p = 2, .margin = 0.5f, .weight = class_weights}));
  // A label out of range is caught on the host before anything runs on the device.
  labels[3] = classes;
  etnn::loss::CrossEntropy ce;
  CHECK_THROWS_AS(ce.value_and_grad(etnn::Cuda{}, device, labels, static_cast<T*>(nullptr)), etnn::ShapeError);
  // The element-wise losses run as one kernel: their sums go through block partials, so they
  // match to rounding. KLDiv's targets are probabilities (log_target: any log-probabilities).
  auto target = random_values<T>(logits.size(), 12);
  for (auto& t : target) t = std::abs(t);
  auto dtarget = to_device(target);
  std::vector<T> grad(logits.size());
  etnn::Buffer<T, etnn::Cuda> dgrad(logits.size());
  const auto check_kernel = [&](const auto& loss, const char* name) {
    INFO(name);
    const T want = loss.value_and_grad(etnn::Cpu{}, host, etnn::TensorView<const T, S>(target.data(), batch), grad.data());
    const T have = loss.value_and_grad(etnn::Cuda{}, device,
                                       etnn::TensorView<const T, S, etnn::Cuda>(dtarget.data(), batch), dgrad.data());
    CHECK(std::abs(static_cast<double>(have - want)) <= tolerance<T> * std::max(1.0, std::abs(double(want))));
    CHECK(max_relative_error(to_host(dgrad), grad) <= tolerance<T>);
  };
  check_kernel(etnn::loss::MSE{}, "MSE");
  check_kernel(etnn::loss::L1({.reduction = etnn::loss::Reduction::sum}), "L1");
  check_kernel(etnn::loss::SmoothL1({.beta = 0.5f}), "SmoothL1");
  check_kernel(etnn::loss::Huber({.delta = 0.7f}), "Huber");
  check_kernel(etnn::loss::BCEWithLogits({.pos_weight = 2.0f}), "BCEWithLogits");
  check_kernel(etnn::loss::KLDiv{}, "KLDiv");
  check_kernel(etnn::loss::KLDiv({.log_target = true}), "KLDiv log_target");
  // The losses whose inputs have a domain check it on the device: BCE's probabilities in its loss
  // kernel, Hinge's -1/+1 and MultiLabelSoftMargin's 0/1 targets (here on the device) in a kernel of
  // their own. Valid inputs match the host; the first element outside the domain is named as on the
  // host.
  std::vector<T> probs(logits.size()), signs(logits.size()), multi_hot(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) {
    probs[i] = T(1) / (T(1) + std::exp(-logits[i]));
    signs[i] = i % 3 == 0 ? T(-1) : T(1);
    multi_hot[i] = i % 4 == 1 ? T(1) : T(0);
  }
  probs[5] = T(0);  // BCE's clamps
  probs[6] = T(1);
  const auto check_domain = [&](const auto& loss, std::vector<T> input, std::vector<T> target, std::size_t bad,
                                bool bad_input, const char* name) {
    INFO(name);
    const etnn::TensorView<const T, S> host_input(input.data(), batch), host_target(target.data(), batch);
    auto dinput = to_device(input);
    auto dtarget_values = to_device(target);
    const etnn::TensorView<const T, S, etnn::Cuda> device_input(dinput.data(), batch),
        device_target(dtarget_values.data(), batch);
    const T want = loss.value_and_grad(etnn::Cpu{}, host_input, host_target, grad.data());
    const T have = loss.value_and_grad(etnn::Cuda{}, device_input, device_target, dgrad.data());
    CHECK(std::abs(static_cast<double>(have - want)) <= tolerance<T> * std::max(1.0, std::abs(double(want))));
    CHECK(max_relative_error(to_host(dgrad), grad) <= tolerance<T>);
    // Two elements outside the domain: both devices name the first.
    (bad_input ? input : target)[bad] = T(2);
    (bad_input ? input : target)[bad + 40] = T(-3);
    std::string host_error, device_error;
    try {
      loss.value(etnn::Cpu{}, host_input, host_target);
    } catch (const etnn::Error& e) {
      host_error = e.what();
    }
    dinput = to_device(input);
    dtarget_values = to_device(target);
    const etnn::TensorView<const T, S, etnn::Cuda> bad_device_input(dinput.data(), batch),
        bad_device_target(dtarget_values.data(), batch);
    try {
      loss.value(etnn::Cuda{}, bad_device_input, bad_device_target);
    } catch (const etnn::Error& e) {
      device_error = e.what();
    }
    CHECK(host_error.find("element " + std::to_string(bad) + " is 2.0") != std::string::npos);
    CHECK(device_error == host_error);
  };
  check_domain(etnn::loss::BCE{}, probs, probs, 17, true, "BCE");
  check_domain(etnn::loss::BCE({.reduction = etnn::loss::Reduction::sum}), probs, multi_hot, 1000, true, "BCE sum");
  check_domain(etnn::loss::Hinge{}, logits, signs, 123, false, "Hinge");
  check_domain(etnn::loss::MultiLabelSoftMargin{}, logits, multi_hot, 2, false, "MultiLabelSoftMargin");
}
