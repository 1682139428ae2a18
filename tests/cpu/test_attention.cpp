// cpu/attention.hpp (blocks of GEMMs) against expr/attention.hpp's functors (the device's math,
// an online softmax per query row) run on the host: O, L and d[Q | K | V], causal and not, at
// lengths that are and are not a multiple of the query block (48), in float and double; and the
// same bits on 1 and 2 threads.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include <etnn/etnn.hpp>

#include "support/thread_count.hpp"

namespace {

template <class S>
std::vector<S> random_values(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1.5, 1.5);
  std::vector<S> v(n);
  for (auto& x : v) x = static_cast<S>(u(gen));
  return v;
}

template <class S>
double worst_difference(const std::vector<S>& a, const std::vector<S>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(double(a[i]) - double(b[i])) / (1 + std::abs(double(b[i]))));
  return worst;
}

template <class S>
struct Results {
  std::vector<S> out, lse, dqkv;
};

// The host kernels' O, L and d[Q | K | V] for given inputs.
template <int T, int D, int H, bool Causal, class S>
Results<S> host_kernels(const std::vector<S>& qkv, const std::vector<S>& dout, std::size_t samples) {
  Results<S> r{std::vector<S>(samples * T * D), std::vector<S>(samples * H * T), std::vector<S>(qkv.size(), S(7))};
  std::vector<S> delta(samples * H * T);
  etnn::attention_forward<T, D, H, Causal>(etnn::Cpu{}, qkv.data(), r.out.data(), r.lse.data(), samples);
  etnn::attention_backward<T, D, H, Causal>(etnn::Cpu{}, qkv.data(), r.out.data(), dout.data(), r.lse.data(),
                                            delta.data(), r.dqkv.data(), samples);
  return r;
}

template <int T, int D, int H, bool Causal, class S>
void check_against_functors(double tolerance) {
  constexpr std::size_t samples = 3;
  const auto qkv = random_values<S>(samples * T * 3 * D, 11);
  const auto dout = random_values<S>(samples * T * D, 12);
  const auto host = host_kernels<T, D, H, Causal>(qkv, dout, samples);

  Results<S> ref{std::vector<S>(samples * T * D), std::vector<S>(samples * H * T), std::vector<S>(qkv.size(), S(7))};
  std::vector<S> delta(samples * H * T);
  const etnn::expr::AttentionForwardRows<T, D, H, Causal, S> forward{qkv.data(), ref.out.data(), ref.lse.data()};
  for (std::size_t i = 0; i < samples * H * T; ++i) forward(i);
  const etnn::expr::AttentionDeltaRows<T, D, H, Causal, S> deltas{ref.out.data(), dout.data(), delta.data()};
  for (std::size_t i = 0; i < samples * H * T; ++i) deltas(i);
  const etnn::expr::AttentionBackwardHeads<T, D, H, Causal, S> backward{qkv.data(), dout.data(), ref.lse.data(),
                                                                       delta.data(), ref.dqkv.data()};
  for (std::size_t i = 0; i < samples * H; ++i) backward(i);

  INFO("T ", T, ", D ", D, ", H ", H, ", causal ", Causal, ", ", sizeof(S), "-byte values");
  CHECK(worst_difference(host.out, ref.out) < tolerance);
  CHECK(worst_difference(host.lse, ref.lse) < tolerance);
  CHECK(worst_difference(host.dqkv, ref.dqkv) < tolerance);
}

}  // namespace

TEST_CASE("attention on the CPU (GEMM blocks) equals the device's functors run on the host") {
  check_against_functors<21, 12, 3, true, double>(1e-12);
  check_against_functors<21, 12, 3, false, double>(1e-12);
  check_against_functors<96, 64, 2, true, double>(1e-12);  // two whole query blocks
  check_against_functors<16, 8, 1, false, double>(1e-12);
  check_against_functors<37, 128, 4, true, float>(2e-5);
  check_against_functors<37, 128, 4, false, float>(2e-5);
  check_against_functors<128, 128, 4, true, float>(2e-5);
}

TEST_CASE("attention on the CPU: the same bits on 1 and 2 threads") {
  constexpr int T = 100, D = 64, H = 2;
  constexpr std::size_t samples = 5;
  const auto qkv = random_values<float>(samples * T * 3 * D, 21);
  const auto dout = random_values<float>(samples * T * D, 22);
  const auto on = [&](int threads) {
    const etnn::test::ThreadCount scope(threads);
    return host_kernels<T, D, H, true>(qkv, dout, samples);
  };
  const auto one = on(1), two = on(2);
  CHECK(one.out == two.out);
  CHECK(one.lse == two.lse);
  CHECK(one.dqkv == two.dqkv);
}
