// Sequence layers: token ids and embeddings, layers acting per position of a (T, D) sequence, 1-d
// convolution over the positions, and multi-head self-attention, each against a naive reference and gradient-checked in double
// precision, and a transformer block gradient-checked whole.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "support/gradcheck.hpp"
#include "support/network_gradcheck.hpp"
#include "support/thread_count.hpp"

namespace nn = etnn::nn;
using etnn::test::check_network_gradients;
using etnn::test::fill_token_ids;
using etnn::test::fill_uniform;

namespace {

// y = softmax(mask(scale Q K^T)) V per head, then the output projection, the textbook way with the
// whole (T, T) score matrix: what the blockwise online-softmax layer must reproduce.
template <int T, int D, int H, class Model>
std::vector<double> naive_attention(const Model& model, const double* x, int batch, bool causal) {
  constexpr int d = D / H;
  const auto tensor = [&](const char* name) { return model.parameters() + etnn::test::parameter_offset<Model>(name); };
  const double* w_in = tensor("0.in_proj_weight");
  const double* b_in = tensor("0.in_proj_bias");
  const double* w_out = tensor("0.out_proj.weight");
  const double* b_out = tensor("0.out_proj.bias");
  std::vector<double> y(static_cast<std::size_t>(batch) * T * D);
  for (int b = 0; b < batch; ++b) {
    std::vector<double> qkv(T * 3 * D), o(T * D);
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < 3 * D; ++c) {
        double s = b_in[c];
        for (int j = 0; j < D; ++j) s += x[(b * T + t) * D + j] * w_in[c * D + j];
        qkv[t * 3 * D + c] = s;
      }
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t) {
        std::vector<double> score(T, -std::numeric_limits<double>::infinity());
        double max = -std::numeric_limits<double>::infinity();
        for (int u = 0; u < (causal ? t + 1 : T); ++u) {
          double s = 0;
          for (int j = 0; j < d; ++j) s += qkv[t * 3 * D + h * d + j] * qkv[u * 3 * D + D + h * d + j];
          score[u] = s / std::sqrt(double(d));
          max = std::max(max, score[u]);
        }
        double sum = 0;
        for (double& s : score) sum += (s = std::exp(s - max));
        for (int j = 0; j < d; ++j) {
          double v = 0;
          for (int u = 0; u < T; ++u) v += score[u] / sum * qkv[u * 3 * D + 2 * D + h * d + j];
          o[t * D + h * d + j] = v;
        }
      }
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < D; ++c) {
        double s = b_out[c];
        for (int j = 0; j < D; ++j) s += o[t * D + j] * w_out[c * D + j];
        y[(b * T + t) * D + c] = s;
      }
  }
  return y;
}

// nn.Conv1d over the positions, the textbook sum with explicit bounds:
//   y[b, t, o] = bias[o] + sum_{c, k} W[o, c, k] x[b, t S - P + k, c]   (x = 0 outside [0, T))
std::vector<double> naive_conv1d(const double* w, const double* bias, const double* x, int batch, int T, int C,
                                 int out, int K, int S, int P) {
  const int out_length = (T + 2 * P - K) / S + 1;
  std::vector<double> y(static_cast<std::size_t>(batch) * out_length * out);
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < out_length; ++t)
      for (int o = 0; o < out; ++o) {
        double s = bias[o];
        for (int c = 0; c < C; ++c)
          for (int k = 0; k < K; ++k) {
            const int i = t * S - P + k;
            if (i >= 0 && i < T) s += w[(o * C + c) * K + k] * x[(b * T + i) * C + c];
          }
        y[(b * out_length + t) * out + o] = s;
      }
  return y;
}

template <int K, int S, int P>
void check_conv1d_forward() {
  constexpr int T = 11, C = 5, N = 4;
  using Net = decltype(nn::input<T, C> >> nn::conv1d<N, K, nn::stride<S>, nn::pad<P>>);
  constexpr int out_length = (T + 2 * P - K) / S + 1;
  static_assert(std::is_same_v<typename Net::output_shape, etnn::Shape<out_length, N>>);
  etnn::Model<Net, double> model(7);
  etnn::test::fill_parameters_uniform(model, 8, 0.5);
  etnn::Tensor<double, etnn::Shape<T, C>> x(3);
  fill_uniform(x.data(), x.size(), 9, 2.0);
  const auto y = model.forward(x);
  const auto ref = naive_conv1d(model.parameters(), model.parameters() + etnn::test::parameter_offset<decltype(model)>("0.bias"), x.data(), 3, T, C, N, K, S, P);
  REQUIRE(y.size() == ref.size());
  double worst = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::abs(y.data()[i] - ref[i]));
  INFO("K ", K, " stride ", S, " pad ", P);
  CHECK(worst < 1e-12);
}

template <bool Causal>
void check_attention_forward() {
  constexpr int T = 37, D = 12, H = 3;  // T spans several key blocks and a partial one
  using Net = decltype(nn::input<T, D> >> nn::multi_head_attention<H, Causal>);
  etnn::Model<Net, double> model(4);
  etnn::test::fill_parameters_uniform(model, 5, 0.5);  // biases off zero too
  etnn::Tensor<double, etnn::Shape<T, D>> x(2);
  fill_uniform(x.data(), x.size(), 6, 2.0);
  const auto y = model.forward(x);
  const auto ref = naive_attention<T, D, H>(model, x.data(), 2, Causal);
  double worst = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::abs(y.data()[i] - ref[i]));
  CHECK(worst < 1e-12);
}

}  // namespace

TEST_CASE("embedding: each position's row of the weight; parameters named as nn.Embedding's") {
  using Net = decltype(nn::input_tokens<4, 6> >> nn::embedding<3>);
  static_assert(std::is_same_v<Net::output_shape, etnn::Shape<4, 3>>);
  const auto named = etnn::Model<Net>::named_parameters();
  REQUIRE(named.size() == 1);
  CHECK(named[0].name == "0.weight");
  CHECK(named[0].shape == std::vector<int>{6, 3});
  etnn::Model<Net> model(1);
  etnn::Tensor<float, etnn::Tokens<4, 6>> ids(2);
  const float given[8] = {0, 5, 2, 2, 3, 1, 4, 0};
  std::copy(given, given + 8, ids.data());
  const auto y = model.forward(ids);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 3; ++j) CHECK(y.data()[i * 3 + j] == model.parameters()[static_cast<int>(given[i]) * 3 + j]);
}

TEST_CASE("embedding: an id outside the vocabulary, or not an integer, names its sample and position") {
  using Net = decltype(nn::input_tokens<4, 6> >> nn::embedding<3>);
  etnn::Model<Net> model(1);
  etnn::Tensor<float, etnn::Tokens<4, 6>> ids(2);
  std::fill(ids.data(), ids.data() + 8, 1.0f);
  for (float bad : {6.0f, -1.0f, 2.5f, std::numeric_limits<float>::quiet_NaN()}) {
    ids.data()[6] = bad;
    try {
      (void)model.forward(ids);
      FAIL("no exception for id ", bad);
    } catch (const etnn::ShapeError& e) {
      const std::string what = e.what();
      CHECK(what.find("sample 1, position 2") != std::string::npos);
      CHECK(what.find("[0, 6)") != std::string::npos);
    }
  }
}

TEST_CASE("linear, layer_norm and positional_embedding act on each position of a sequence") {
  constexpr int T = 3, D = 4;
  using Net = decltype(nn::input<T, D> >> nn::positional_embedding >> nn::layer_norm >> nn::linear<2>);
  static_assert(std::is_same_v<Net::output_shape, etnn::Shape<T, 2>>);
  etnn::Model<Net, double> model(2);
  const auto named = etnn::Model<Net, double>::named_parameters();
  CHECK(named[0].shape == std::vector<int>{T, D});  // 0.weight: the position table
  CHECK(named[1].shape == std::vector<int>{D});     // 1.weight: nn.LayerNorm(D)
  CHECK(named[3].shape == std::vector<int>{2, D});  // 2.weight: nn.Linear(D, 2)
  etnn::test::fill_parameters_uniform(model, 3, 0.7);
  etnn::Tensor<double, etnn::Shape<T, D>> x(2);
  fill_uniform(x.data(), x.size(), 4, 2.0);
  const auto y = model.forward(x);
  const double* table = model.parameters() + named[0].offset;
  const double* gamma = model.parameters() + named[1].offset;
  const double* beta = model.parameters() + named[2].offset;
  const double* w = model.parameters() + named[3].offset;
  const double* bias = model.parameters() + named[4].offset;
  for (int r = 0; r < 2 * T; ++r) {
    double v[D], mean = 0, var = 0;
    for (int j = 0; j < D; ++j) mean += (v[j] = x.data()[r * D + j] + table[(r % T) * D + j]) / D;
    for (int j = 0; j < D; ++j) var += (v[j] - mean) * (v[j] - mean) / D;
    for (int j = 0; j < D; ++j) v[j] = gamma[j] * (v[j] - mean) / std::sqrt(var + 1e-5) + beta[j];
    for (int c = 0; c < 2; ++c) {
      double s = bias[c];
      for (int j = 0; j < D; ++j) s += w[c * D + j] * v[j];
      CHECK(y.data()[r * 2 + c] == doctest::Approx(s).epsilon(1e-12));
    }
  }
}

TEST_CASE("conv1d: forward equals the naive sum over taps and channels, for strides and paddings") {
  check_conv1d_forward<3, 1, 1>();  // "same" length
  check_conv1d_forward<3, 1, 0>();  // valid only
  check_conv1d_forward<4, 2, 1>();  // strided, windows that start in the padding
  check_conv1d_forward<5, 3, 2>();  // a stride that skips inputs at the end
  check_conv1d_forward<1, 1, 0>();  // a per-position linear map
}

TEST_CASE("conv1d's window index math: the tap that reads an input is the one the output reads from") {
  // in_position(t, k) (im2col) and out_position(i, k) (the dx gather, run one device thread per
  // row) must be inverses wherever the window lies inside the sequence, and out_position must
  // answer -1 exactly where no output position's tap k reads i.
  auto check = [](auto geometry) {
    using G = decltype(geometry);
    for (int k = 0; k < G::kernel; ++k)
      for (int i = 0; i < G::length; ++i) {
        int reader = -1;
        for (int t = 0; t < G::out_length; ++t)
          if (G::in_position(t, k) == i) reader = t;
        CHECK(G::out_position(i, k) == reader);
      }
  };
  check(nn::detail::SequenceWindow<11, 2, 3, 1, 1>{});
  check(nn::detail::SequenceWindow<10, 3, 4, 2, 2>{});
  check(nn::detail::SequenceWindow<13, 1, 5, 3, 0>{});  // the last inputs read by no tap
  check(nn::detail::SequenceWindow<7, 2, 7, 1, 3>{});
}

TEST_CASE("conv1d: parameters named, shaped and initialised as nn.Conv1d's") {
  using Net = decltype(nn::input<16, 6> >> nn::conv1d<8, 3, nn::pad<1>> >> nn::relu);
  static_assert(std::is_same_v<Net::output_shape, etnn::Shape<16, 8>>);
  const auto named = etnn::Model<Net>::named_parameters();
  REQUIRE(named.size() == 2);
  CHECK(named[0].name == "0.weight");
  CHECK(named[0].shape == std::vector<int>{8, 6, 3});
  CHECK(named[1].name == "0.bias");
  CHECK(named[1].shape == std::vector<int>{8});
  // kaiming_uniform(a = sqrt 5): U(+-1/sqrt(C K)) for weight and bias alike.
  etnn::Model<Net> model(3);
  const double bound = 1 / std::sqrt(18.0);
  double widest = 0;
  for (std::size_t i = 0; i < Net::flat_size; ++i) widest = std::max(widest, std::abs(double(model.parameters()[i])));
  CHECK(widest <= bound);
  CHECK(widest > 0.9 * bound);
  CHECK(etnn::summary<Net>().find("conv1d<8,3,stride<1>,pad<1>>") != std::string::npos);
}

TEST_CASE("multi_head_attention: forward equals the naive softmax(Q K^T / sqrt(d)) V") {
  check_attention_forward<false>();
  check_attention_forward<true>();
}

TEST_CASE("multi_head_attention: parameters named and initialised as nn.MultiheadAttention's") {
  constexpr int D = 16;
  using Net = decltype(nn::input<5, D> >> nn::multi_head_attention<4, true>);
  const auto named = etnn::Model<Net>::named_parameters();
  REQUIRE(named.size() == 4);
  CHECK(named[0].name == "0.in_proj_weight");
  CHECK(named[0].shape == std::vector<int>{3 * D, D});
  CHECK(named[1].name == "0.in_proj_bias");
  CHECK(named[2].name == "0.out_proj.weight");
  CHECK(named[2].shape == std::vector<int>{D, D});
  CHECK(named[3].name == "0.out_proj.bias");
  etnn::Model<Net> model(7);
  const float* p = model.parameters();
  const double xavier = std::sqrt(6.0 / (4 * D)), fan_in = 1 / std::sqrt(double(D));
  for (std::size_t i = 0; i < named[0].numel; ++i) CHECK(std::abs(p[named[0].offset + i]) <= xavier);
  for (std::size_t i = 0; i < named[2].numel; ++i) CHECK(std::abs(p[named[2].offset + i]) <= fan_in);
  for (std::size_t i = 0; i < named[1].numel; ++i) CHECK(p[named[1].offset + i] == 0.0f);
  for (std::size_t i = 0; i < named[3].numel; ++i) CHECK(p[named[3].offset + i] == 0.0f);
}

TEST_CASE("causal attention: no position sees a later one") {
  constexpr int T = 20, D = 8;
  using Net = decltype(nn::input<T, D> >> nn::multi_head_attention<2, true>);
  etnn::Model<Net, double> model(3);
  etnn::Tensor<double, etnn::Shape<T, D>> x(1);
  fill_uniform(x.data(), x.size(), 9);
  const auto before = model.forward(x);
  for (int j = 0; j < D; ++j) x.data()[12 * D + j] += 1.0;  // change position 12 only
  const auto after = model.forward(x);
  for (int i = 0; i < 12 * D; ++i) CHECK(after.data()[i] == before.data()[i]);
  CHECK(after.data()[12 * D] != before.data()[12 * D]);
}

TEST_CASE("gradcheck: embedding (scatter-add of repeated ids)") {
  // 5 ids from 4 per sample: some repeat, so their rows sum several positions.
  check_network_gradients<decltype(nn::input_tokens<5, 4> >> nn::embedding<3> >> nn::flatten >> nn::linear<3>)>(
      "embedding", 3);
}

TEST_CASE("gradcheck: positional_embedding, and linear + gelu and layer_norm per position") {
  check_network_gradients<decltype(nn::input<4, 3> >> nn::linear<5> >> nn::gelu >> nn::positional_embedding >>
                                   nn::layer_norm >> nn::linear<3> >> nn::flatten >> nn::linear<3>)>(
      "per position", 3);
}

TEST_CASE("gradcheck: conv1d, strided and padded, fused with its activation, with its input gradient") {
  // The linear before each conv1d checks dL/dx through the column gather.
  check_network_gradients<decltype(nn::input<9, 3> >> nn::linear<4> >> nn::conv1d<5, 3, nn::pad<1>> >> nn::gelu >>
                                   nn::flatten >> nn::linear<3>)>("conv1d same", 2);
  check_network_gradients<decltype(nn::input<10, 3> >> nn::linear<2> >> nn::conv1d<4, 4, nn::stride<2>, nn::pad<2>> >>
                                   nn::tanh >> nn::conv1d<3, 2, nn::stride<3>> >> nn::flatten >> nn::linear<3>)>(
      "conv1d strided", 3, 5);
}

TEST_CASE("gradcheck: multi_head_attention, causal and not, with its input gradient") {
  // The linear before the attention checks dL/dx through it; T = 19 crosses a key block.
  check_network_gradients<decltype(nn::input<19, 6> >> nn::linear<6> >> nn::multi_head_attention<2, false> >>
                                   nn::flatten >> nn::linear<3>)>("attention", 2, 11, [](auto& model) {
    etnn::test::fill_parameters_uniform(model, 12, 0.6);
  });
  check_network_gradients<decltype(nn::input<19, 6> >> nn::linear<6> >> nn::multi_head_attention<3, true> >>
                                   nn::flatten >> nn::linear<3>)>("causal attention", 2, 13, [](auto& model) {
    etnn::test::fill_parameters_uniform(model, 14, 0.6);
  });
}

TEST_CASE("gradcheck: a transformer block over token ids") {
  constexpr int D = 8;
  check_network_gradients<decltype(nn::input_tokens<6, 9> >> nn::embedding<D> >> nn::positional_embedding >>
                                   nn::residual(nn::layer_norm >> nn::multi_head_attention<2, true>) >>
                                   nn::residual(nn::layer_norm >> nn::linear<4 * D> >> nn::gelu >> nn::linear<D>) >>
                                   nn::layer_norm >> nn::flatten >> nn::linear<3>)>("transformer block", 2, 21,
                                                                                    [](auto& model) {
    // Off PyTorch's zero biases and unit norms, so every product of the chain rule is exercised.
    etnn::test::fill_parameters_uniform(model, 22, 0.5);
  });
}

TEST_CASE("attention, conv1d and embedding gradients are bitwise the same on 1 and 2 threads") {
  constexpr int T = 24, D = 16;
  using Net = decltype(nn::input_tokens<T, 11> >> nn::embedding<D> >> nn::conv1d<D, 3, nn::pad<1>> >> nn::gelu >>
                       nn::positional_embedding >>
                       nn::residual(nn::layer_norm >> nn::multi_head_attention<4, true>) >> nn::flatten >>
                       nn::linear<5>);
  auto gradients_on = [](int threads) {
    etnn::test::ThreadCount pool(threads);
    etnn::Model<Net> model(5);
    etnn::Tensor<float, etnn::Tokens<T, 11>> ids(16);
    fill_token_ids(ids.data(), ids.size(), 6, 11);
    std::vector<int> labels(16);
    for (int b = 0; b < 16; ++b) labels[b] = b % 5;
    etnn::loss::CrossEntropy loss;
    etnn::optim::SGD opt(model, {.lr = 0.1f});
    etnn::Trainer trainer(model, loss, opt);
    model.zero_grad();
    trainer.accumulate_gradients(ids, labels);
    return std::vector<float>(model.gradients(), model.gradients() + Net::flat_size);
  };
  // On the engine this process chose; ctest's nn.eigen_gemm runs this again on Eigen's.
  MESSAGE("float GEMM engine: ", std::string(etnn::cpu::gemm_engine_name(etnn::cpu::float_gemm_engine())));
  const auto one = gradients_on(1);
  for (const int threads : {2, 3}) {
    const auto other = gradients_on(threads);
    CAPTURE(threads);
    CHECK(std::memcmp(one.data(), other.data(), one.size() * sizeof(float)) == 0);
  }
}
