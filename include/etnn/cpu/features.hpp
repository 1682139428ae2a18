#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// What this process runs, decided once at run time from the CPU it runs on, whatever -march the
// program was built with:
//  - the float GEMM (float_gemm_engine):
//      avx512: etnn's packed GEMM (cpu/packed_gemm.hpp) on its AVX-512 kernels, on x86-64 CPUs
//              with AVX-512F and an OS that saves its registers;
//      avx2:   the same GEMM on its AVX2 kernels, on x86-64 CPUs with AVX2 and FMA but no AVX-512;
//      eigen:  Eigen's kernels for the build's instruction set, everywhere else;
//    ETNN_CPU_GEMM=eigen in the environment forces Eigen's, ETNN_CPU_GEMM=avx2 the AVX2 kernels
//    where the CPU has them (to compare them, or to rule one out);
//  - the elementwise loops (wide_vectors, cpu/widest_vectors.hpp): a copy compiled for AVX-512
//    (F, BW, DQ, VL, with AVX2 and FMA) on CPUs and OSes that have all of it, the build's own code
//    elsewhere; ETNN_CPU_AVX512=0 in the environment forces the build's own code.
#include <cstdlib>
#include <cstring>


// Whether this compiler can build the packed GEMM's kernels into any program (target attributes).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ETNN_PACKED_GEMM 1
#else
#define ETNN_PACKED_GEMM 0
#endif

// Whether elementwise loops get AVX-512 copies chosen at run time: in every x86-64 build that does
// not target AVX-512 already (one that does runs its own code, which is that copy).
#if ETNN_PACKED_GEMM && !(defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && \
                          defined(__AVX512VL__) && defined(__FMA__))
#define ETNN_AVX512_COPIES 1
#else
#define ETNN_AVX512_COPIES 0
#endif

// The instruction sets of the elementwise loops' wide copies: the target attribute of
// cpu/widest_vectors.hpp's copy and the run-time check below name the same ones (each needs its
// names as string literals, so they are spelled once each, here).
#define ETNN_WIDE_VECTORS_TARGET "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma"

namespace etnn::cpu {

enum class GemmEngine { eigen, avx2, avx512 };

inline GemmEngine detect_gemm_engine() {
  const char* forced = std::getenv("ETNN_CPU_GEMM");
  if (forced != nullptr && std::strcmp(forced, "eigen") == 0) return GemmEngine::eigen;
#if ETNN_PACKED_GEMM
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (forced != nullptr && std::strcmp(forced, "avx2") == 0 && avx2) return GemmEngine::avx2;
  if (__builtin_cpu_supports("avx512f")) return GemmEngine::avx512;
  if (avx2) return GemmEngine::avx2;
#endif
  return GemmEngine::eigen;
}

inline GemmEngine float_gemm_engine() {
  static const GemmEngine engine = detect_gemm_engine();
  return engine;
}

#if ETNN_PACKED_GEMM
// Whether this CPU (and OS) runs every instruction set of ETNN_WIDE_VECTORS_TARGET.
inline bool cpu_has_wide_vectors() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2") &&
         __builtin_cpu_supports("fma");
}
#endif

// Whether the elementwise loops run their AVX-512 copies.
inline bool detect_wide_vectors() {
#if ETNN_AVX512_COPIES
  const char* forced = std::getenv("ETNN_CPU_AVX512");
  if (forced != nullptr && std::strcmp(forced, "0") == 0) return false;
  return cpu_has_wide_vectors();
#else
  return false;
#endif
}

inline bool wide_vectors() {
  static const bool wide = detect_wide_vectors();
  return wide;
}

inline const char* gemm_engine_name(GemmEngine engine) {
  switch (engine) {
    case GemmEngine::avx512: return "etnn-avx512";
    case GemmEngine::avx2: return "etnn-avx2";
    case GemmEngine::eigen: break;
  }
  return "eigen";
}

}  // namespace etnn::cpu
