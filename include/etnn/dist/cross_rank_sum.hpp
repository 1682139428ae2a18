#pragma once
// Private to dist/: include <etnn/dist/dist.hpp> or <etnn/etnn.hpp>.
// A type-erased sum over the ranks of a data-parallel job, for layers whose forward or backward
// needs statistics of the whole global batch (batch norm with TrainerOptions::sync_batch_norm).
// Empty (false) in a single process or when the statistics stay local.
#include <cstddef>

namespace etnn::dist {

class CrossRankSum {
 public:
  CrossRankSum() = default;
  // values = their sum over ranks, by reducer.start_allreduce_sum and wait (any Reducer).
  template <class R>
  explicit CrossRankSum(R& reducer)
      : reducer_(&reducer), sum_([](void* r, double* values, std::size_t n) {
          auto& typed = *static_cast<R*>(r);
          auto pending = typed.start_allreduce_sum(values, n);
          typed.wait(pending);
        }) {}

  explicit operator bool() const noexcept { return sum_ != nullptr; }
  void operator()(double* values, std::size_t n) const {
    if (sum_ != nullptr) sum_(reducer_, values, n);
  }

 private:
  void* reducer_ = nullptr;
  void (*sum_)(void*, double*, std::size_t) = nullptr;
};

}  // namespace etnn::dist
