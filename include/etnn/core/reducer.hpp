#pragma once
// The Reducer concept: how the optimizer step talks to the other ranks of a data-parallel job.
// Optimizer<Rule, Model, Reducer> averages gradients with allreduce_mean before each update and
// broadcasts parameters from rank 0 when it is built. dist::Local, the single-process policy,
// lives here because every optimizer defaults to it; dist/ adds Mpi and Nccl.
#include <concepts>
#include <cstddef>

namespace etnn {

template <class R>
concept Reducer = requires(R& r, float* f, double* d, std::size_t n) {
  { r.rank() } -> std::convertible_to<int>;
  { r.size() } -> std::convertible_to<int>;
  r.allreduce_mean(f, n);
  r.allreduce_mean(d, n);
  r.broadcast(f, n, 0);
  r.broadcast(d, n, 0);
};

namespace dist {

// One process: every collective is the identity.
struct Local {
  int rank() const noexcept { return 0; }
  int size() const noexcept { return 1; }
  template <class T> void allreduce_mean(T*, std::size_t) noexcept {}
  template <class T> void broadcast(T*, std::size_t, int) noexcept {}
};

}  // namespace dist
}  // namespace etnn
