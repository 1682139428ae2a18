#pragma once
// Devices are compile-time tags; a device knows how to allocate and free its memory.
#include <cstddef>
#include <cstdlib>
#include <new>
#include <string_view>
#include <type_traits>

namespace etnn {

// Host memory; kernels in cpu/ (Eigen GEMM, OpenMP loops).
struct Cpu {
  static constexpr std::string_view name = "cpu";
  // 64-byte alignment: one cache line, and what AVX-512 loads like.
  static constexpr std::size_t alignment = 64;

  static void* allocate(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    const std::size_t rounded = (bytes + alignment - 1) / alignment * alignment;
    void* p = std::aligned_alloc(alignment, rounded);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  static void deallocate(void* p) noexcept { std::free(p); }
};

// NVIDIA GPU through CUDA; its memory functions live in cuda/ and exist only under nvcc.
struct Cuda {
  static constexpr std::string_view name = "cuda";
};

template <class D>
concept DeviceType = std::is_same_v<D, Cpu> || std::is_same_v<D, Cuda>;

}  // namespace etnn
