#pragma once
// Private to core/: include <etnn/core/core.hpp> or <etnn/etnn.hpp>.
// The alignment of every region etnn lays out: each parameter, gradient and buffer tensor in the
// model's flat arrays, each workspace region, starts on a 256-byte boundary. That is what
// cuBLASLt's fastest kernels and tensor-core loads want (a misaligned operand gets a slower kernel
// or CUBLAS_STATUS_NOT_SUPPORTED), what cudaMalloc returns, and four cache lines on a CPU.
//
// Offsets are counted in values and laid out once for every scalar type, so the unit is 64
// values: 256 bytes of float, 512 of double. A workspace laid out per sample (regions of n_i
// values per sample, for C samples, one after another) reserves aligned_values(n_i) per sample
// for each: every region then starts at a multiple of 64 values whatever C, and a region whose
// width is already a multiple of 64 is laid out exactly as before.
#include <cstddef>

#include "config.hpp"

namespace etnn {

inline constexpr std::size_t region_alignment_bytes = 256;
inline constexpr std::size_t region_alignment_values = 64;

// n rounded up to a multiple of region_alignment_values.
ETNN_HD constexpr std::size_t aligned_values(std::size_t n) {
  return (n + region_alignment_values - 1) / region_alignment_values * region_alignment_values;
}

// Whether p starts on a region_alignment_bytes boundary.
inline bool region_aligned(const void* p) {
  return reinterpret_cast<std::size_t>(p) % region_alignment_bytes == 0;
}

}  // namespace etnn
