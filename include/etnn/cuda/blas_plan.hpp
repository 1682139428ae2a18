#pragma once
// Private to cuda/blas.hpp: what a cuBLASLt plan is chosen for (its key, the operands' alignment)
// and the locked map that keeps the plans. No CUDA header, so that a host test
// (tests/cuda/test_blas_plan.cpp) checks it without a GPU.
//
// cuBLASLt's heuristic assumes 256-byte-aligned operands unless told otherwise
// (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES), and an algorithm chosen for that faults or
// fails (misaligned address, CUBLAS_STATUS_NOT_SUPPORTED) on operands that are not. etnn's
// operands are views into packed buffers: LeNet's second weight starts at byte 624 (16-aligned), a
// bias right after its weight (at + Out In values), rows of a batch-37 float matrix 148 bytes apart
// (4-aligned). So each operand's real alignment is told to the heuristic and is part of the key:
// a plan chosen for 256-byte-aligned pointers is never used for 4-byte-aligned ones.
#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace etnn::cuda {

enum class Epilogue { none, bias };

namespace detail {

// The most alignment cuBLASLt asks about (its default assumption).
inline constexpr unsigned max_blas_alignment = 256;

// The largest power of two, at most 256, dividing `bytes` (256 for 0).
constexpr unsigned alignment_of(std::uintptr_t bytes) {
  if (bytes == 0) return max_blas_alignment;
  const std::uintptr_t lowest = bytes & (~bytes + 1);  // the lowest set bit
  return lowest >= max_blas_alignment ? max_blas_alignment : static_cast<unsigned>(lowest);
}

// The alignment of every column of a column-major matrix at `address` with leading dimension ld
// (elements of element_bytes each): column j starts at address + j ld element_bytes, so it is the
// largest power of two (at most 256) dividing both address and ld element_bytes.
constexpr unsigned matrix_alignment(std::uintptr_t address, std::size_t ld, std::size_t element_bytes) {
  const unsigned of_address = alignment_of(address);
  const unsigned of_stride = alignment_of(ld * element_bytes);
  return of_address < of_stride ? of_address : of_stride;
}

template <class V>
unsigned matrix_alignment(const V* p, int ld) {
  return matrix_alignment(reinterpret_cast<std::uintptr_t>(p), static_cast<std::size_t>(ld), sizeof(V));
}

// What a plan (descriptors and algorithm) is chosen for. The types are cudaDataType_t values.
// C is also the result D (etnn's products are in place), so align_c stands for both.
struct PlanKey {
  bool transpose_a, transpose_b;
  int m, n, k, lda, ldb, ldc;
  Epilogue epilogue;
  int operand_type, result_type;
  bool beta_zero;
  unsigned align_a, align_b, align_c;  // matrix_alignment of A, B, C in bytes
  friend auto operator<=>(const PlanKey&, const PlanKey&) = default;
};

// The plans made so far, one per key, shared by every host thread. use(key, make, run) finds the
// key's plan (making it with make(key) the first time) and calls run(plan) under one lock: a plan's
// descriptor is changed by a call (its bias pointer), so that change and the launch that reads it
// must not interleave with another thread's. run only enqueues work on the stream, so the lock is
// held for microseconds.
template <class Plan>
class PlanCache {
 public:
  template <class Make, class Run>
  void use(const PlanKey& key, Make&& make, Run&& run) {
    const std::lock_guard<std::mutex> lock(mutex_);
    auto it = plans_.find(key);
    if (it == plans_.end()) it = plans_.emplace(key, make(key)).first;
    run(it->second);
  }

  std::size_t size() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return plans_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::map<PlanKey, Plan> plans_;
};

}  // namespace detail
}  // namespace etnn::cuda
