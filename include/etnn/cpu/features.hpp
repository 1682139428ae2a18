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
//  - the elementwise loops (vector_copy, cpu/widest_vectors.hpp): a copy compiled for AVX-512
//    (F, BW, DQ, VL, with AVX2 and FMA) on CPUs and OSes that have all of it, else a copy compiled
//    for AVX2 and FMA on CPUs that have those, else the build's own code; a build that already
//    targets one of these instruction sets has no copy for it (its own code is that copy).
//    ETNN_CPU_VECTORS=own in the environment forces the build's own code, ETNN_CPU_VECTORS=avx2
//    the AVX2 copy where the CPU has AVX2 (to compare them, or to rule one out).
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

// Whether they get AVX2 copies too: in every x86-64 build that does not target AVX2 and FMA
// already (a consumer's portable build, whose own loops are SSE2's, 4 floats wide).
#if ETNN_PACKED_GEMM && !(defined(__AVX2__) && defined(__FMA__))
#define ETNN_AVX2_COPIES 1
#else
#define ETNN_AVX2_COPIES 0
#endif

// The instruction sets of the elementwise loops' copies: the target attributes of
// cpu/widest_vectors.hpp's copies and the run-time checks below name the same ones (each needs its
// names as string literals, so they are spelled once each, here).
#define ETNN_AVX512_VECTORS_TARGET "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma"
#define ETNN_AVX2_VECTORS_TARGET "avx2,fma"

namespace etnn::cpu {

enum class GemmEngine { eigen, avx2, avx512 };

// Which copy of the elementwise loops runs (cpu/widest_vectors.hpp): the build's own code, or the
// one compiled for AVX2 and FMA, or the one compiled for AVX-512.
enum class VectorCopy { own, avx2, avx512 };

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
// Whether this CPU (and OS) runs every instruction set of ETNN_AVX512_VECTORS_TARGET.
inline bool cpu_has_avx512_vectors() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2") &&
         __builtin_cpu_supports("fma");
}

// Whether it runs every instruction set of ETNN_AVX2_VECTORS_TARGET.
inline bool cpu_has_avx2_vectors() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
#endif

// The widest copy of the elementwise loops that this build has, this CPU runs and
// ETNN_CPU_VECTORS allows.
inline VectorCopy detect_vector_copy() {
  const char* forced = std::getenv("ETNN_CPU_VECTORS");
  if (forced != nullptr && std::strcmp(forced, "own") == 0) return VectorCopy::own;
#if ETNN_AVX512_COPIES
  const bool at_most_avx2 = forced != nullptr && std::strcmp(forced, "avx2") == 0;
  if (!at_most_avx2 && cpu_has_avx512_vectors()) return VectorCopy::avx512;
#endif
#if ETNN_AVX2_COPIES
  if (cpu_has_avx2_vectors()) return VectorCopy::avx2;
#endif
  return VectorCopy::own;
}

inline VectorCopy vector_copy() {
  static const VectorCopy copy = detect_vector_copy();
  return copy;
}

inline const char* vector_copy_name(VectorCopy copy) {
  switch (copy) {
    case VectorCopy::avx512: return "AVX-512 copies";
    case VectorCopy::avx2: return "AVX2 copies";
    case VectorCopy::own: break;
  }
  return "the build's own code";
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
