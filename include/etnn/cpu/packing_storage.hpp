#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// The packed float GEMM's block sizes (cpu/packed_gemm.hpp) and each thread's packing storage:
// one size for every product, so that a thread allocates it once (pool workers when they start,
// cpu/thread_pool.hpp; a caller in its first GEMM, which Trainer::reserve's warm-up pass runs)
// whichever tiles it takes later. A caller also keeps storage for an A and a B packed whole.
#include <cstddef>

#include "../core/device.hpp"
#include "../tensor/buffer.hpp"

namespace etnn::cpu::packed {

inline constexpr int mr = 6;            // rows of a register tile (its columns: each kernel set's nr)
inline constexpr int kc_max = 256;      // depth of a K block
inline constexpr int mc = 96;           // rows of A packed at a time: mc x kc floats (96 KiB) in L2
inline constexpr int tile_cols = 512;   // columns of C per tile: a packed B block, kc x 512 floats (512 KiB), in L2

inline constexpr std::size_t packed_a_floats = std::size_t{mc} * kc_max;
inline constexpr std::size_t packed_b_floats = std::size_t{tile_cols} * kc_max;

// The calling thread's packing storage: packed_a_floats for A, then packed_b_floats for B.
inline float* packing_storage() {
  thread_local Buffer<float, Cpu> storage(packed_a_floats + packed_b_floats);
  return storage.data();
}

// The most floats of a whole packed A, and of a whole packed B (16 MiB each): a larger one is
// packed by each tile instead.
inline constexpr std::size_t whole_operand_max_floats = std::size_t{1} << 22;

// The calling thread's storage for a whole packed operand, at least `floats` of it: one for A
// (Operand 0) and one for B (Operand 1). It grows to the largest product its thread has packed
// whole: the first training step does (Trainer::reserve's warm-up pass), so later steps allocate
// nothing.
template <int Operand>
float* whole_operand_storage(std::size_t floats) {
  thread_local Buffer<float, Cpu> storage;
  if (storage.size() < floats) storage = Buffer<float, Cpu>(floats);
  return storage.data();
}
inline float* whole_a_storage(std::size_t floats) { return whole_operand_storage<0>(floats); }
inline float* whole_b_storage(std::size_t floats) { return whole_operand_storage<1>(floats); }

}  // namespace etnn::cpu::packed
