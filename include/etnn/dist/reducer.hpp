#pragma once
// Private to dist/: include <etnn/dist/dist.hpp> or <etnn/etnn.hpp>.
// The Reducer concept: how the optimizer step talks to the other ranks of a data-parallel job.
// Optimizer<Rule, Model, Reducer> broadcasts parameters from rank 0 when it is built, and sums
// gradient buckets across ranks with non-blocking allreduces started while backward still runs.
// dist::Local, the single-process policy, lives here because every optimizer defaults to it;
// dist/mpi.hpp and dist/nccl.hpp add the multi-process ones.
//
//   rank(), size()                         this process's place in the job
//   broadcast(data, n, root)               data = root's data, on every rank
//   start_allreduce_sum(data, n) -> Pending   begins data = sum over ranks of data
//   poll(pending) -> bool                  drives progress; true once complete
//   wait(pending)                          blocks until complete (or throws: a rank failed)
//   abort(reason)                          ends the whole job (a collective was abandoned midway);
//                                          a single process has nothing to end and returns
// and optionally
//   shared_storage<T>(n) -> storage            memory whose ranges it sums in place (dist::Mpi on
//                                          one machine), where an optimizer keeps the gradients
//                                          (optim/gradient_storage.hpp)
//   finite_sum(pending) -> int             after a completed sum: 1 when it is known to hold no NaN
//                                          and no infinity, 0 when it holds one, -1 unchecked (the
//                                          non-finite guard then reads the sum itself)
#include <concepts>
#include <cstddef>
#include <type_traits>

namespace etnn::dist {

template <class R>
concept Reducer = requires(R& r, float* f, double* d, std::size_t n, typename R::Pending& pending) {
  { r.rank() } -> std::convertible_to<int>;
  { r.size() } -> std::convertible_to<int>;
  r.broadcast(f, n, 0);
  r.broadcast(d, n, 0);
  { r.start_allreduce_sum(f, n) } -> std::same_as<typename R::Pending>;
  { r.start_allreduce_sum(d, n) } -> std::same_as<typename R::Pending>;
  { r.poll(pending) } -> std::convertible_to<bool>;
  r.wait(pending);
  r.abort("reason");
};

// Whether reducer R sums memory of Device: one that names its memory (dist::Mpi the host's,
// dist::Nccl the GPU's) takes models on that device only; one that does not (dist::Local) any.
template <class R, class Device>
consteval bool reducer_takes_device() {
  if constexpr (requires { typename R::memory; })
    return std::is_same_v<typename R::memory, Device>;
  else
    return true;
}
template <class R, class Device>
inline constexpr bool reducer_takes = reducer_takes_device<R, Device>();

// One process: every collective is the identity.
struct Local {
  struct Pending {};
  int rank() const noexcept { return 0; }
  int size() const noexcept { return 1; }
  template <class T> void broadcast(T*, std::size_t, int) noexcept {}
  template <class T> Pending start_allreduce_sum(T*, std::size_t) noexcept { return {}; }
  bool poll(Pending&) noexcept { return true; }
  void wait(Pending&) noexcept {}
  void abort(const char*) noexcept {}
};

}  // namespace etnn::dist
