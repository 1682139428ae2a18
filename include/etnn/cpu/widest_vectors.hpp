#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// Runs a loop body with the widest vector instructions this CPU has, whatever -march the program
// was built with (a consumer's portable build gets SSE2 loops otherwise: half the speed of the
// same loops at 256 bits, a third of it at 512). with_widest_vectors(f, args...) calls f(args...)
// through one of
//  - avx512_copy, which carries the AVX-512 target attribute: the compiler inlines f's body (and
//    what it calls inline) into it and vectorises it there at 512 bits;
//  - avx2_copy, the same with AVX2 and FMA, at 256 bits;
//  - f itself: the build's own code;
// as cpu/features.hpp's vector_copy() says for this CPU (a build that targets an instruction set
// already has no copy for it: ETNN_AVX512_COPIES, ETNN_AVX2_COPIES).
// parallel_chunks (cpu/parallel.hpp) runs every chunk this way, the packed GEMM (cpu/packed_gemm.hpp)
// its epilogues; so every elementwise loop of a training step does. Every copy computes the same
// expressions; they may round differently where a copy with FMA contracts a * b + c into one
// instruction, as a build with -march for the CPU does.
#include "features.hpp"

namespace etnn::cpu {

namespace detail {

#if ETNN_AVX512_COPIES
template <class F, class... Args>
[[gnu::target(ETNN_AVX512_VECTORS_TARGET)]] void avx512_copy(F& f, Args... args) {
  f(args...);
}
#endif

#if ETNN_AVX2_COPIES
template <class F, class... Args>
[[gnu::target(ETNN_AVX2_VECTORS_TARGET)]] void avx2_copy(F& f, Args... args) {
  f(args...);
}
#endif

}  // namespace detail

template <class F, class... Args>
void with_widest_vectors(F& f, Args... args) {
  switch (vector_copy()) {
#if ETNN_AVX512_COPIES
    case VectorCopy::avx512: detail::avx512_copy(f, args...); return;
#endif
#if ETNN_AVX2_COPIES
    case VectorCopy::avx2: detail::avx2_copy(f, args...); return;
#endif
    default: f(args...);
  }
}

}  // namespace etnn::cpu
