#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// Which float GEMM this process runs, decided once at run time from the CPU it runs on:
//   packed: etnn's AVX-512 kernels (cpu/packed_gemm.hpp), on x86-64 CPUs with AVX-512F and an OS
//           that saves its registers, whatever -march the program was built with;
//   eigen:  Eigen's kernels for the build's instruction set, everywhere else.
// ETNN_CPU_GEMM=eigen in the environment forces Eigen's (to compare the two, or to rule one out).
#include <cstdlib>
#include <cstring>


// Whether this compiler can build the AVX-512 kernels into any program (target attributes).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ETNN_PACKED_GEMM 1
#else
#define ETNN_PACKED_GEMM 0
#endif

namespace etnn::cpu {

enum class GemmEngine { eigen, packed };

inline GemmEngine detect_gemm_engine() {
  const char* forced = std::getenv("ETNN_CPU_GEMM");
  if (forced != nullptr && std::strcmp(forced, "eigen") == 0) return GemmEngine::eigen;
#if ETNN_PACKED_GEMM
  if (__builtin_cpu_supports("avx512f")) return GemmEngine::packed;
#endif
  return GemmEngine::eigen;
}

inline GemmEngine float_gemm_engine() {
  static const GemmEngine engine = detect_gemm_engine();
  return engine;
}

inline const char* gemm_engine_name(GemmEngine engine) {
  return engine == GemmEngine::packed ? "etnn-avx512" : "eigen";
}

}  // namespace etnn::cpu
