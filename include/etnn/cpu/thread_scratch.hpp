#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// thread_scratch<T>(values): the calling thread's scratch of at least `values` T, a buffer of its
// own that grows to the largest request and is reused (as the GEMM's packing buffers are), so a
// pass allocates nothing after its first. One buffer per thread and T: a caller uses it within
// one call and must not hold it across another caller's (convolution's columns, attention's
// score blocks).
#include <cstddef>

#include "../core/device.hpp"
#include "../tensor/buffer.hpp"

namespace etnn::cpu {

template <class T>
T* thread_scratch(std::size_t values) {
  thread_local Buffer<T, Cpu> scratch;
  scratch.reserve_discard(values);
  return scratch.data();
}

}  // namespace etnn::cpu
