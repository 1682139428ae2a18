#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// The layout of a GEMM operand: a transposed matrix is the other layout of the same memory.
#include <cstddef>

namespace etnn::cpu {

enum class Layout { row_major, col_major };

// Element (i, j) of a matrix with the given layout and leading dimension.
template <Layout L, class T>
const T* at(const T* m, std::ptrdiff_t ld, std::ptrdiff_t i, std::ptrdiff_t j) {
  return L == Layout::row_major ? m + i * ld + j : m + j * ld + i;
}

}  // namespace etnn::cpu
