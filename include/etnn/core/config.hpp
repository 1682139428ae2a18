#pragma once
// Private to core/: include <etnn/core/core.hpp> or <etnn/etnn.hpp>.
// Build-wide configuration: version and the host/device annotation for functors.

#define ETNN_VERSION_MAJOR 0
#define ETNN_VERSION_MINOR 1
#define ETNN_VERSION_PATCH 0

// ETNN_HD marks functions that run on the host and, under nvcc, on the device.
// Every elementwise functor and update rule is ETNN_HD so both backends share one definition.
// ETNN_SIMD before a loop whose iterations are independent (an elementwise op, an index loop
// whose f(i) the GPU would run one thread per index): vectorised at -O2 too. GCC's -O2 cost
// model leaves such loops scalar unless told (clang's -O2 vectorises them anyway); under OpenMP
// `omp simd` tells it; ETNN_SIMD_REDUCTION(max, x) is the same for a loop reducing x.
#define ETNN_PRAGMA(text) _Pragma(#text)
#if defined(_OPENMP) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define ETNN_SIMD ETNN_PRAGMA(omp simd)
#define ETNN_SIMD_REDUCTION(op, variable) ETNN_PRAGMA(omp simd reduction(op : variable))
#else
#define ETNN_SIMD
#define ETNN_SIMD_REDUCTION(op, variable)
#endif

// ETNN_UNROLL(n) before a loop with a constant trip count: unrolled n times (GCC, clang), so that
// register-tile arrays stay in registers at -O2 too. Nothing under nvcc, whose front end warns
// on the pragma (it hands host code to GCC, whose -O3 unrolls such loops anyway).
#if defined(__CUDACC__) || !defined(__GNUC__)
#define ETNN_UNROLL(n)
#elif defined(__clang__)
#define ETNN_UNROLL(n) ETNN_PRAGMA(unroll n)
#else
#define ETNN_UNROLL(n) ETNN_PRAGMA(GCC unroll n)
#endif

// ETNN_INLINE: always inlined. For small math functions called in loops that must vectorise: a
// call the inliner declines (GCC's -O2 declines many) keeps the whole loop scalar.
#if defined(__CUDACC__)
#define ETNN_INLINE __forceinline__
#elif defined(__GNUC__)
#define ETNN_INLINE [[gnu::always_inline]] inline
#else
#define ETNN_INLINE inline
#endif

#if defined(__CUDACC__)
#define ETNN_HD __host__ __device__
#else
#define ETNN_HD
#endif
