#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// Runs a loop body with the widest vector instructions this CPU has, whatever -march the program
// was built with (a consumer's portable build gets SSE2 loops otherwise: a third of the speed of
// the same loops at 512 bits). with_widest_vectors(f, args...) calls f(args...) either
//  - through avx512_copy, which carries the AVX-512 target attribute: the compiler inlines f's
//    body (and what it calls inline) into it and vectorises it there at 512 bits, when
//    cpu/features.hpp's wide_vectors() says this CPU has AVX-512; or
//  - directly: the build's own code (a build for AVX-512 has no other copy: ETNN_AVX512_COPIES).
// parallel_chunks (cpu/parallel.hpp) runs every chunk this way, the packed GEMM (cpu/packed_gemm.hpp)
// its epilogues; so every elementwise loop of a training step does. Both copies compute the same
// expressions; they may round differently where the wide copy contracts a * b + c into one FMA,
// as a build with -march for the CPU does.
#include "features.hpp"

namespace etnn::cpu {

#if ETNN_AVX512_COPIES
namespace detail {

template <class F, class... Args>
[[gnu::target(ETNN_WIDE_VECTORS_TARGET)]] void avx512_copy(F& f, Args... args) {
  f(args...);
}

}  // namespace detail
#endif

template <class F, class... Args>
void with_widest_vectors(F& f, Args... args) {
#if ETNN_AVX512_COPIES
  if (wide_vectors()) {
    detail::avx512_copy(f, args...);
    return;
  }
#endif
  f(args...);
}

}  // namespace etnn::cpu
