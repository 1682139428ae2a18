#pragma once
// Private to dist/: include <etnn/dist/dist.hpp> or <etnn/etnn.hpp>.
// Compile-time checks of reducers (dist/reducer.hpp): the members a data-parallel policy needs
// and the device whose memory it sums.
// Each check is a consteval function whose static_assert message starts with a grep-able key
// (ETNN_...) and says how to fix it; the node that needs it writes
// `static_assert(check::something<...>());`. tests/compile_fail/ holds one program per message.
#include <concepts>
#include <cstddef>

namespace etnn::dist::check {

template <bool ReducerReadsThisMemory>
consteval bool reducer_device() {
  static_assert(ReducerReadsThisMemory,
                "ETNN_REDUCER_DEVICE: this reducer sums another device's memory than the model's: "
                "etnn::dist::Mpi takes etnn::Cpu models, etnn::dist::Nccl takes etnn::Cuda models");
  return true;
}

// Names each member a would-be Reducer lacks (the Reducer concept of dist/reducer.hpp, one
// requirement per message).
template <class R>
consteval bool reducer() {
  static_assert(requires(R& r) { { r.rank() } -> std::convertible_to<int>; },
                "ETNN_REDUCER: the reducer has no `int rank()` member (see dist/reducer.hpp)");
  static_assert(requires(R& r) { { r.size() } -> std::convertible_to<int>; },
                "ETNN_REDUCER: the reducer has no `int size()` member (see dist/reducer.hpp)");
  static_assert(requires(R& r, float* f, double* d, std::size_t n) {
                  r.broadcast(f, n, 0);
                  r.broadcast(d, n, 0);
                },
                "ETNN_REDUCER: the reducer has no `broadcast(T* data, size_t n, int root)` member for float and double");
  static_assert(requires { typename R::Pending; },
                "ETNN_REDUCER: the reducer has no `Pending` type (the handle of a started allreduce)");
  static_assert(requires(R& r, float* f, double* d, std::size_t n) {
                  { r.start_allreduce_sum(f, n) } -> std::same_as<typename R::Pending>;
                  { r.start_allreduce_sum(d, n) } -> std::same_as<typename R::Pending>;
                },
                "ETNN_REDUCER: the reducer has no `Pending start_allreduce_sum(T* data, size_t n)` member for float "
                "and double");
  static_assert(requires(R& r, typename R::Pending& p) { { r.poll(p) } -> std::convertible_to<bool>; },
                "ETNN_REDUCER: the reducer has no `bool poll(Pending&)` member");
  static_assert(requires(R& r, typename R::Pending& p) { r.wait(p); },
                "ETNN_REDUCER: the reducer has no `wait(Pending&)` member");
  static_assert(requires(R& r) { r.abort("reason"); },
                "ETNN_REDUCER: the reducer has no `abort(const char* reason)` member");
  return true;
}

}  // namespace etnn::dist::check
