// The machine's float GEMM rates, the yardstick for bench_train's GFLOP/s, at 1 and 2 threads:
//   etnn:  etnn's CPU product (cpu/gemm.hpp: the run-time-chosen engine, named in the line)
//   eigen: Eigen's product for this build's instruction set
//   dnnl:  oneDNN's dnnl_sgemm (when CMake found libdnnl-dev), which picks its kernels at run time
// on wide/256's forward product (C(256, 2048) = X(256, 2048) W^T, W (2048, 2048)), an N x N
// square (default 1024), and each product of wide/256's training step (n=wide-*: the forward, dX and
// dW products of its two wide layers, as cpu/dense.hpp issues them), median over the multiplies of
// SECONDS each.
//   gemm_rate [N] [SECONDS]
// Prints one line per library, shape and thread count:
//   result library=NAME-gemm n=SHAPE threads=T gflops=G [engine=E]
// Built with the preset's flags (like bench_train), so they compare the same code generation.
#include <Eigen/Core>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <etnn/etnn.hpp>
#if defined(ETNN_BENCH_WITH_DNNL)
#include <dnnl.h>
#endif
#if defined(_OPENMP)
#include <omp.h>  // oneDNN threads through OpenMP
#endif

namespace {

using Clock = std::chrono::steady_clock;

// C(m, n) = op(A) op(B): A (k, m) row-major read as its transpose when a_transposed (a dW product,
// dZ^T X), B (n, k) row-major read as its transpose when b_transposed (a forward product, X W^T).
struct Shape {
  int m, n, k;
  bool a_transposed, b_transposed;
  std::string name;
};

template <class F>
double median_rate(const Shape& s, double seconds, F&& multiply) {
  const double flops = 2.0 * s.m * s.n * static_cast<double>(s.k);
  multiply();  // warm-up
  std::vector<double> rates;
  const auto start = Clock::now();
  do {
    const auto t0 = Clock::now();
    multiply();
    rates.push_back(flops / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9);
  } while (rates.size() < 3 || std::chrono::duration<double>(Clock::now() - start).count() < seconds);
  std::nth_element(rates.begin(), rates.begin() + static_cast<std::ptrdiff_t>(rates.size() / 2), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::stoi(argv[1]) : 1024;
  const double seconds = argc > 2 ? std::stod(argv[2]) : 1.0;
  // wide = input<784> >> linear<2048> >> relu >> linear<2048> >> relu >> linear<10>, batch 256.
  const std::vector<Shape> shapes = {{256, 2048, 2048, false, true, "256x2048x2048"},
                                     {n, n, n, false, false, std::to_string(n)},
                                     {256, 2048, 784, false, true, "wide-forward1"},
                                     {256, 2048, 2048, false, false, "wide-dx2"},
                                     {2048, 784, 256, true, false, "wide-dw1"},
                                     {2048, 2048, 256, true, false, "wide-dw2"}};
  std::vector<float> a(static_cast<std::size_t>(2048) * std::max(2048, n)), b(a.size()), c(a.size());
  etnn::Rng rng(1);
  for (auto* v : {&a, &b}) for (float& x : *v) x = static_cast<float>(rng.uniform(-1.0, 1.0));
  const char* engine = etnn::cpu::gemm_engine_name(etnn::cpu::float_gemm_engine());
  using etnn::cpu::Layout;
  using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  for (const int threads : {1, 2}) {
    etnn::set_num_threads(threads);
    Eigen::setNbThreads(threads);
#if defined(_OPENMP)
    omp_set_num_threads(threads);
#endif
    for (const Shape& s : shapes) {
      const auto report = [&](const char* library, double gflops, const char* extra) {
        std::printf("result library=%s-gemm n=%s threads=%d gflops=%.1f%s\n", library, s.name.c_str(), threads, gflops,
                    extra);
      };
      const std::string engine_field = std::string(" engine=") + engine;
      report("etnn", median_rate(s, seconds, [&] {
        const etnn::cpu::Accumulate no = etnn::cpu::Accumulate::no;
        if (s.a_transposed) {
          etnn::cpu::gemm<Layout::col_major, Layout::row_major>(no, s.m, s.n, s.k, a.data(), s.m, b.data(), s.n,
                                                                c.data(), s.n);
        } else if (s.b_transposed) {
          etnn::cpu::gemm<Layout::row_major, Layout::col_major>(no, s.m, s.n, s.k, a.data(), s.k, b.data(), s.k,
                                                                c.data(), s.n);
        } else {
          etnn::cpu::gemm<Layout::row_major, Layout::row_major>(no, s.m, s.n, s.k, a.data(), s.k, b.data(), s.n,
                                                                c.data(), s.n);
        }
      }), engine_field.c_str());
      Eigen::Map<const RowMatrix> am(a.data(), s.a_transposed ? s.k : s.m, s.a_transposed ? s.m : s.k),
          bm(b.data(), s.b_transposed ? s.n : s.k, s.b_transposed ? s.k : s.n);
      Eigen::Map<RowMatrix> cm(c.data(), s.m, s.n);
      report("eigen", median_rate(s, seconds, [&] {
        if (s.a_transposed) {
          cm.noalias() = am.transpose() * bm;
        } else if (s.b_transposed) {
          cm.noalias() = am * bm.transpose();
        } else {
          cm.noalias() = am * bm;
        }
      }), "");
#if defined(ETNN_BENCH_WITH_DNNL)
      report("dnnl", median_rate(s, seconds, [&] {
        dnnl_sgemm(s.a_transposed ? 'T' : 'N', s.b_transposed ? 'T' : 'N', s.m, s.n, s.k, 1.0f, a.data(),
                   s.a_transposed ? s.m : s.k, b.data(), s.b_transposed ? s.k : s.n, 0.0f, c.data(), s.n);
      }), "");
#endif
    }
  }
  std::printf("checksum %g\n", static_cast<double>(c[0]));
  return 0;
}
