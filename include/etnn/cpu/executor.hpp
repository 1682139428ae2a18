#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// The CPU executor: evaluates an elementwise expression into memory in one fused loop, and runs
// an ETNN_HD functor over an index range (the optimizers' update rules, dropout) or over rows
// (the per-sample math of softmax and layer norm).
#include <algorithm>
#include <cstddef>
#include <string>

#include "../core/device.hpp"
#include "../expr/checks.hpp"
#include "../expr/expression.hpp"
#include "parallel.hpp"

namespace etnn {

// dst[i] = e[i] for i < e.size(). dst may alias any operand that is read at the same index.
template <class T, expr::Expression E>
void assign(Cpu, T* dst, const E& e) {
  static_assert(expr::check::sized_expression<E::sized>());
  const std::size_t n = e.size();
  cpu::parallel_chunks(n, 4096, 1, [&](std::size_t begin, std::size_t end) {
    ETNN_SIMD
    for (std::size_t i = begin; i < end; ++i) dst[i] = e[i];
  });
}

// dst[i] = value for i < n.
template <class T>
void fill(Cpu, T* dst, std::size_t n, T value) {
  cpu::parallel_chunks(n, 4096, 1, [&](std::size_t begin, std::size_t end) {
    ETNN_SIMD
    for (std::size_t i = begin; i < end; ++i) dst[i] = value;
  });
}

// f(i) for i < n, on the host threads.
template <class F>
void for_each_index(Cpu, std::size_t n, const F& f) {
  cpu::parallel_for(n, f);
}

// The same for an f(i) costing about work_per_index operations (a row of a layer's per-sample
// math, a feature's column): indices are split across the host threads once the whole is worth
// it. f is an ETNN_HD functor that the device runs one thread per index (cuda/executor.hpp).
template <class F>
void for_each_index(Cpu, std::size_t n, std::size_t work_per_index, const F& f) {
  cpu::parallel_chunks(n, 1, work_per_index, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) f(i);
  });
}

}  // namespace etnn
