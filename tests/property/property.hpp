#pragma once
// The property tests' cases (tests/property/shapes.inc, made by generate_shapes.py): each runs a
// generated instantiation of a layer or an expression and compares it with a naive reference
// (tests/support/naive_reference.hpp); the GRAD = 1 cases also check the gradients in double.
// Each layer case puts a trainable layer before the one under test (linear<IN>, or a 1x1 conv)
// so that the gradient check covers the tested layer's input gradient too.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "support/naive_reference.hpp"
#include "support/network_gradcheck.hpp"

namespace etnn::test::property {

namespace nn = etnn::nn;
namespace fn = etnn::fn;

// |got - want| <= tol (1 + |want|): tol 1e-11 in double, 2e-5 in float (the reference is exact
// double arithmetic on the same inputs and parameters).
template <class T>
void check_close(const T* got, std::size_t n, const std::vector<double>& want, const char* what) {
  INFO(std::string(what));
  REQUIRE(n == want.size());
  const double tol = std::is_same_v<T, double> ? 1e-11 : 2e-5;
  std::size_t bad = 0;
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double diff = std::abs(static_cast<double>(got[i]) - want[i]);
    worst = std::max(worst, diff / (1 + std::abs(want[i])));
    if (!(diff <= tol * (1 + std::abs(want[i])))) ++bad;
  }
  INFO("worst relative difference ", worst);
  CHECK(bad == 0);
}

// The offset of parameter tensor `name` ("1.weight") in Model's flat buffer.
template <class Model>
std::size_t offset_of(const std::string& name) {
  for (const auto& p : Model::named_parameters())
    if (p.name == name) return p.offset;
  FAIL("no parameter ", name);
  return 0;
}

// Only the GRAD = 1 cases instantiate the gradient check (a Trainer): compile time.
template <class Net, class T, int Grad>
void check_gradients(const char* what, int batch) {
  if constexpr (Grad != 0) {
    static_assert(std::is_same_v<T, double>, "generate_shapes.py sets GRAD only for double cases");
    check_network_gradients<Net>(what, batch, 7);
  }
}

// (B, IN) -> linear<IN> -> linear<OUT>
template <class T, int In, int Out, int Batch, int Grad>
void linear_case(const char* what) {
  using Net = decltype(nn::input<In> >> nn::linear<In> >> nn::linear<Out>);
  using Model = etnn::Model<Net, T>;
  Model model(static_cast<std::uint64_t>(In * 100 + Out));
  etnn::Tensor<T, etnn::Shape<In>> x(Batch);
  fill_uniform(x.data(), x.size(), 3, 1.5);
  const T* p = model.parameters();
  const auto h = naive_linear(x.data(), p + offset_of<Model>("0.weight"), p + offset_of<Model>("0.bias"), Batch, In, In);
  const auto want = naive_linear(h.data(), p + offset_of<Model>("1.weight"), p + offset_of<Model>("1.bias"), Batch, In, Out);
  const auto y = model.forward(x);
  check_close(y.data(), y.size(), want, what);
  check_gradients<Net, T, Grad>(what, Batch);
}

// (B, C, H, W) -> conv2d<C, 1> -> conv2d<OUT, K, stride<S>, pad<P>>, flattened
template <class T, int C, int H, int W, int Out, int K, int S, int P, int Batch, int Grad>
void conv_case(const char* what) {
  using Net = decltype(nn::input<C, H, W> >> nn::conv2d<C, 1> >> nn::conv2d<Out, K, nn::stride<S>, nn::pad<P>> >>
                       nn::flatten);
  using Model = etnn::Model<Net, T>;
  Model model(static_cast<std::uint64_t>(C * 1000 + H * 100 + W * 10 + K));
  etnn::Tensor<T, etnn::Shape<C, H, W>> x(Batch);
  fill_uniform(x.data(), x.size(), 5, 1.5);
  const T* p = model.parameters();
  const auto h = naive_conv(x.data(), p + offset_of<Model>("0.weight"), p + offset_of<Model>("0.bias"), Batch, C, H, W,
                            C, 1, 1, 0);
  const auto want = naive_conv(h.data(), p + offset_of<Model>("1.weight"), p + offset_of<Model>("1.bias"), Batch, C, H,
                               W, Out, K, S, P);
  const auto y = model.forward(x);
  check_close(y.data(), y.size(), want, what);
  check_gradients<Net, T, Grad>(what, Batch);
}

// (B, C, H, W) -> conv2d<C, 1> -> max_pool2d or avg_pool2d<K, stride<S>, pad<P>>, flattened
template <class T, int Max, int C, int H, int W, int K, int S, int P, int Batch, int Grad>
void pool_case(const char* what) {
  using Pool = std::conditional_t<Max != 0, decltype(nn::max_pool2d<K, nn::stride<S>, nn::pad<P>>),
                                  decltype(nn::avg_pool2d<K, nn::stride<S>, nn::pad<P>>)>;
  using Net = decltype(nn::input<C, H, W> >> nn::conv2d<C, 1> >> Pool{} >> nn::flatten);
  using Model = etnn::Model<Net, T>;
  Model model(static_cast<std::uint64_t>(C * 1000 + H * 100 + W * 10 + K));
  etnn::Tensor<T, etnn::Shape<C, H, W>> x(Batch);
  fill_uniform(x.data(), x.size(), 6, 1.5);
  const T* p = model.parameters();
  const auto h = naive_conv(x.data(), p + offset_of<Model>("0.weight"), p + offset_of<Model>("0.bias"), Batch, C, H, W,
                            C, 1, 1, 0);
  const auto y = model.forward(x);
  check_close(y.data(), y.size(), naive_pool(h.data(), Batch * C, H, W, K, S, P, Max != 0), what);
  check_gradients<Net, T, Grad>(what, Batch);
}

// The scalar type of an expression node or of a scalar.
template <class V>
struct ScalarOf {
  using type = V;
};
template <class V>
  requires requires { typename V::value_type; }
struct ScalarOf<V> {
  using type = typename V::value_type;
};
template <class V>
using scalar_of = typename ScalarOf<std::remove_cvref_t<V>>::type;

// The generated expressions read apply<F>(x) and derivative<F>(x, y): on expression nodes they
// are etnn's, on scalars these, so the same text gives the fused expression and the reference.
using etnn::expr::apply;
using etnn::expr::derivative;
template <class F, class T>
  requires std::is_floating_point_v<T>
T apply(T x) {
  return F{}(x);
}
template <class F, class T>
  requires std::is_floating_point_v<T>
T derivative(T x, T y) {
  return F{}.derivative(x, y);
}

// build(a, b, c) on arrays of n values in [-2, 2) evaluated in one fused pass equals build on each
// element's scalars.
template <class T, class Build>
void expr_case(std::size_t n, const char* what, Build build) {
  std::vector<T> a(n), b(n), c(n), out(n);
  fill_uniform(a.data(), n, n + 1, 2.0);
  fill_uniform(b.data(), n, n + 2, 2.0);
  fill_uniform(c.data(), n, n + 3, 2.0);
  etnn::assign(etnn::Cpu{}, out.data(), build(etnn::expr::ref(a.data(), n), etnn::expr::ref(b.data(), n),
                                              etnn::expr::ref(c.data(), n)));
  std::vector<double> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = static_cast<double>(build(a[i], b[i], c[i]));
  check_close(out.data(), n, want, what);
}

}  // namespace etnn::test::property

// The case macros of shapes.inc; a test file defines those it runs as these and the others empty.
#define ETNN_PROPERTY_LINEAR(T, IN, OUT, BATCH, GRAD) \
  linear_case<T, IN, OUT, BATCH, GRAD>("linear(" #T ", " #IN ", " #OUT ", " #BATCH ")");
#define ETNN_PROPERTY_CONV(T, C, H, W, OUT, K, S, P, BATCH, GRAD) \
  conv_case<T, C, H, W, OUT, K, S, P, BATCH, GRAD>(               \
      "conv(" #T ", " #C ", " #H ", " #W ", " #OUT ", " #K ", " #S ", " #P ", " #BATCH ")");
#define ETNN_PROPERTY_POOL(T, MAX, C, H, W, K, S, P, BATCH, GRAD) \
  pool_case<T, MAX, C, H, W, K, S, P, BATCH, GRAD>(               \
      "pool(" #T ", " #MAX ", " #C ", " #H ", " #W ", " #K ", " #S ", " #P ", " #BATCH ")");
#define ETNN_PROPERTY_EXPR(T, N, ...)                                \
  expr_case<T>(N, #T ", " #N ": " #__VA_ARGS__, [](auto a, auto b, auto c) { \
    using S [[maybe_unused]] = scalar_of<decltype(a)>;               \
    (void)a;                                                         \
    (void)b;                                                         \
    (void)c;                                                         \
    return __VA_ARGS__;                                              \
  });
