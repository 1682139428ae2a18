// The elementwise loops' AVX-512 and AVX2 copies (cpu/widest_vectors.hpp), in a program built
// without -march (tests/CMakeLists.txt: cpu_portable), as a consumer's portable build is: the
// widest the CPU runs is taken, each computes what the build's own code computes (bitwise, except
// where one FMA replaces a multiply and an add), and their results do not depend on the thread
// count.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <etnn/etnn.hpp>

#include "support/thread_count.hpp"

namespace {

using etnn::test::ThreadCount;

// Values of every kind an elementwise loop meets: normal, tiny (subnormal), zero of both signs,
// huge, and a NaN and an infinity every so often. n is not a multiple of any vector width.
template <class T>
std::vector<T> awkward_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (i % 97) {
      case 13: v[i] = std::numeric_limits<T>::denorm_min() * T(3); break;
      case 29: v[i] = T(-0.0); break;
      case 41: v[i] = std::numeric_limits<T>::max() / T(2); break;
      case 53: v[i] = n > 500 ? std::numeric_limits<T>::quiet_NaN() : T(1); break;
      case 71: v[i] = n > 500 ? -std::numeric_limits<T>::infinity() : T(1); break;
      default: v[i] = static_cast<T>(normal(rng));
    }
  }
  return v;
}

// The flags line of /proc/cpuinfo (empty where there is none): the kernel's word on the CPU,
// independent of the compiler's __builtin_cpu_supports.
std::string cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) return line.substr(line.find(':') + 1) + " ";
  return {};
}

// Whether `flags` (cpuinfo_flags) names every instruction set of a target attribute's list.
bool has_every_flag(const std::string& flags, const std::string& target) {
  std::istringstream wanted(target);
  for (std::string flag; std::getline(wanted, flag, ',');)
    if (flags.find(" " + flag + " ") == std::string::npos) return false;
  return true;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

}  // namespace

TEST_CASE("elementwise loops take the widest copy this build has and the CPU runs") {
  using etnn::cpu::VectorCopy;
  const char* forced_env = std::getenv("ETNN_CPU_VECTORS");
  const std::string forced = forced_env != nullptr ? forced_env : "";
  MESSAGE("elementwise loops: ", std::string(etnn::cpu::vector_copy_name(etnn::cpu::vector_copy())));
  const std::string flags = cpuinfo_flags();
  if (flags.empty()) {
    MESSAGE("skipped: no /proc/cpuinfo to check the choice against");
    return;
  }
  const bool avx512 = ETNN_AVX512_COPIES && forced != "avx2" && has_every_flag(flags, ETNN_AVX512_VECTORS_TARGET);
  const bool avx2 = ETNN_AVX2_COPIES && has_every_flag(flags, ETNN_AVX2_VECTORS_TARGET);
  const VectorCopy expected = forced == "own" ? VectorCopy::own
                              : avx512        ? VectorCopy::avx512
                              : avx2          ? VectorCopy::avx2
                                              : VectorCopy::own;
  CHECK(etnn::cpu::vector_copy() == expected);
#if ETNN_PACKED_GEMM
  CHECK(etnn::cpu::cpu_has_avx512_vectors() == has_every_flag(flags, ETNN_AVX512_VECTORS_TARGET));
  CHECK(etnn::cpu::cpu_has_avx2_vectors() == has_every_flag(flags, ETNN_AVX2_VECTORS_TARGET));
#endif
}

#if ETNN_AVX512_COPIES || ETNN_AVX2_COPIES
namespace {

// Runs the same loops through the build's own code and through `copy` (one of cpu/widest_vectors.hpp's
// copies, as copy(f, begin, end)), and checks that they agree.
template <class T, class Copy>
void check_copy_computes_what_own_code_does(Copy copy) {
  for (const std::size_t n : {std::size_t{1}, std::size_t{15}, std::size_t{17}, std::size_t{1001}}) {
    CAPTURE(n);
    const std::vector<T> x = awkward_values<T>(n, 1), g = awkward_values<T>(n, 2);
    // One operation per loop (no a * b + c for an FMA to join): the two copies agree bitwise.
    const auto exact = [&](std::vector<T>& out) {
      return [&](std::size_t begin, std::size_t end) {
        ETNN_SIMD
        for (std::size_t i = begin; i < end; ++i) out[i] = etnn::fn::Relu{}(x[i]);
        ETNN_SIMD
        for (std::size_t i = begin; i < end; ++i) out[i] *= g[i];
        ETNN_SIMD
        for (std::size_t i = begin; i < end; ++i) out[i] = out[i] + x[i] / T(3);
      };
    };
    std::vector<T> own(n), copied(n);
    auto own_loop = exact(own), copied_loop = exact(copied);
    own_loop(std::size_t{0}, n);
    copy(copied_loop, std::size_t{0}, n);
    CHECK(same_bits(own, copied));

    // The non-finite scan finds the same index in both.
    const auto scan = [&](std::size_t& out) {
      return [&](std::size_t begin, std::size_t end) { out = etnn::cpu::detail::last_non_finite(x.data() + begin, end - begin); };
    };
    std::size_t own_found = 0, copied_found = 0;
    auto own_scan = scan(own_found), copied_scan = scan(copied_found);
    own_scan(std::size_t{0}, n);
    copy(copied_scan, std::size_t{0}, n);
    CHECK(own_found == copied_found);
    CHECK(own_found == (n > 500 ? std::size_t{944} : n));  // the last infinity: 9 * 97 + 71

    // SGD with momentum, w -= lr (mu v + g): the copy may fuse a multiply and an add.
    std::vector<T> w_own = x, w_copied = x, v_own = g, v_copied = g;
    using Update = etnn::optim::rules::Sgd::Update<T, etnn::optim::rules::Sgd::Momentum::heavy_ball>;
    const Update own_update{w_own.data(), g.data(), v_own.data(), T(0.01), T(0.9), T(0), T(1e-4), T(1)};
    const Update copied_update{w_copied.data(), g.data(), v_copied.data(), T(0.01), T(0.9), T(0), T(1e-4), T(1)};
    const auto loop = [](const Update& u) {
      return [&u](std::size_t begin, std::size_t end) {
        ETNN_SIMD
        for (std::size_t i = begin; i < end; ++i) u(i);
      };
    };
    auto own_sgd = loop(own_update), copied_sgd = loop(copied_update);
    own_sgd(std::size_t{0}, n);
    copy(copied_sgd, std::size_t{0}, n);
    for (std::size_t i = 0; i < n; ++i) {
      INFO("index ", i, ": ", w_own[i], " vs ", w_copied[i]);
      if (std::isfinite(w_own[i])) {
        CHECK(std::abs(w_copied[i] - w_own[i]) <= T(4) * std::numeric_limits<T>::epsilon() * (T(1) + std::abs(w_own[i])));
      } else {
        CHECK(std::isnan(w_own[i]) == std::isnan(w_copied[i]));
      }
    }
  }
}

}  // namespace

// Every copy this build has and the CPU runs, whichever of them vector_copy() chose.
TEST_CASE_TEMPLATE("each copy of a loop computes what the build's own code does", T, float, double) {
#if ETNN_AVX512_COPIES
  SUBCASE("AVX-512") {
    if (etnn::cpu::cpu_has_avx512_vectors()) {
      check_copy_computes_what_own_code_does<T>([](auto& f, std::size_t begin, std::size_t end) { etnn::cpu::detail::avx512_copy(f, begin, end); });
    } else {
      MESSAGE("skipped: this CPU has no AVX-512");
    }
  }
#endif
#if ETNN_AVX2_COPIES
  SUBCASE("AVX2") {
    if (etnn::cpu::cpu_has_avx2_vectors()) {
      check_copy_computes_what_own_code_does<T>([](auto& f, std::size_t begin, std::size_t end) { etnn::cpu::detail::avx2_copy(f, begin, end); });
    } else {
      MESSAGE("skipped: this CPU has no AVX2 and FMA");
    }
  }
#endif
}
#endif

TEST_CASE("an update through parallel chunks is bitwise the same on 1, 2 and 3 threads") {
  const std::size_t n = std::size_t{1} << 17;  // past parallel_threshold: the chunks do split
  const std::vector<float> start = awkward_values<float>(n, 3), g = awkward_values<float>(n, 4);
  using Update = etnn::optim::rules::Sgd::Update<float, etnn::optim::rules::Sgd::Momentum::nesterov>;
  std::vector<float> reference;
  for (const int threads : {1, 2, 3}) {
    ThreadCount count(threads);
    std::vector<float> w = start, v = g;
    etnn::for_each_index(etnn::Cpu{}, n, Update{w.data(), g.data(), v.data(), 0.01f, 0.9f, 0.0f, 1e-4f, 1.0f});
    if (reference.empty()) {
      reference = w;
    } else {
      INFO(threads, " threads");
      CHECK(same_bits(w, reference));
    }
  }
}
