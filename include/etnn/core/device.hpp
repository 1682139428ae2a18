#pragma once
// Private to core/: include <etnn/core/core.hpp> or <etnn/etnn.hpp>.
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
  // 256-byte alignment, as the device's: every region etnn lays out in it then starts on a
  // 256-byte boundary (core/alignment.hpp), and AVX-512 loads never split a cache line.
  static constexpr std::size_t alignment = 256;

  static void* allocate(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    const std::size_t rounded = (bytes + alignment - 1) / alignment * alignment;
    void* p = std::aligned_alloc(alignment, rounded);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  static void deallocate(void* p) noexcept { std::free(p); }
};

// NVIDIA GPU through CUDA. Its memory functions are defined in cuda/memory.hpp and exist only
// under nvcc: outside a CUDA build, naming etnn::Cuda in a Model is a compile error
// (ETNN_DEVICE_UNAVAILABLE), never a link error.
struct Cuda {
  static constexpr std::string_view name = "cuda";
#if defined(__CUDACC__)
  // 256-byte alignment, as cudaMalloc gives: every tensor-core and vector load is aligned.
  static constexpr std::size_t alignment = 256;
  static void* allocate(std::size_t bytes);   // stream-ordered on etnn's stream
  static void deallocate(void* p) noexcept;
#endif
};

// Whether this build has a device's kernels (Cuda only under nvcc).
template <class D>
inline constexpr bool device_compiled = std::is_same_v<D, Cpu>
#if defined(__CUDACC__)
                                        || std::is_same_v<D, Cuda>
#endif
    ;

template <class D>
concept DeviceType = std::is_same_v<D, Cpu> || std::is_same_v<D, Cuda>;

}  // namespace etnn
