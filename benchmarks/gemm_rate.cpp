// The machine's float GEMM rate with Eigen, the yardstick for bench_train's GFLOP/s: C = A B with
// N x N matrices (default 1024), at 1 and 2 threads, median over the multiplies of SECONDS each.
//   gemm_rate [N] [SECONDS]
// Prints one line per thread count:  result library=eigen-gemm n=N threads=T gflops=G
// Built with the preset's flags (like bench_train), so the two compare the same code generation.
#include <Eigen/Core>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::stoi(argv[1]) : 1024;
  const double seconds = argc > 2 ? std::stod(argv[2]) : 1.0;
  using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Matrix a = Matrix::Random(n, n);
  const Matrix b = Matrix::Random(n, n);
  Matrix c(n, n);
  using Clock = std::chrono::steady_clock;
  const double flops = 2.0 * n * n * static_cast<double>(n);
  for (const int threads : {1, 2}) {
    Eigen::setNbThreads(threads);
    c.noalias() = a * b;  // warm-up
    std::vector<double> rates;
    const auto start = Clock::now();
    do {
      const auto t0 = Clock::now();
      c.noalias() = a * b;
      rates.push_back(flops / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9);
    } while (rates.size() < 3 || std::chrono::duration<double>(Clock::now() - start).count() < seconds);
    std::nth_element(rates.begin(), rates.begin() + static_cast<std::ptrdiff_t>(rates.size() / 2), rates.end());
    std::printf("result library=eigen-gemm n=%d threads=%d gflops=%.1f checksum=%g\n", n, Eigen::nbThreads(),
                rates[rates.size() / 2], static_cast<double>(c(0, 0)));
  }
  return 0;
}
