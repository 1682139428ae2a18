#pragma once
// Private to backend/: include <etnn/backend/backend.hpp> or <etnn/etnn.hpp>.
// Where a buffer holds a NaN or an infinity, on the buffer's device: the non-finite guard's scan,
// cpu/non_finite.hpp on the host and, under nvcc, cuda/non_finite.hpp on the GPU; and the guard's
// verdict decided on the device (StepVerdict: cuda/step_verdict.hpp on a CUDA device).
#include <cstddef>
#include <type_traits>

#include "../core/device.hpp"
#include "../cpu/non_finite.hpp"
#if defined(__CUDACC__)
#include "../cuda/input_check.hpp"
#include "../cuda/non_finite.hpp"
#include "../cuda/step_verdict.hpp"
#endif

namespace etnn::backend {

// The largest i < n with x[i] NaN or infinite; n when every value is finite.
template <class T>
std::size_t last_non_finite(Cpu, const T* x, std::size_t n) {
  return cpu::detail::last_non_finite(x, n);
}

// The first i in [begin, end) with x[i] NaN or infinite; end when there is none.
template <class T>
std::size_t first_non_finite(Cpu, const T* x, std::size_t begin, std::size_t end) {
  return cpu::detail::first_non_finite(x, begin, end);
}

#if defined(__CUDACC__)
template <class T>
std::size_t last_non_finite(Cuda, const T* x, std::size_t n) {
  return cuda::detail::last_non_finite(x, n);
}

template <class T>
std::size_t first_non_finite(Cuda, const T* x, std::size_t begin, std::size_t end) {
  return cuda::detail::first_non_finite(x, begin, end);
}
#endif

// Where the non-finite guard's verdict on a step can be decided on the device and read by the host
// later (cuda::StepVerdict); NoStepVerdict where it cannot (the host decides at once).
struct NoStepVerdict {};
template <class Device>
struct StepVerdictOf {
  using type = NoStepVerdict;
};
#if defined(__CUDACC__)
template <>
struct StepVerdictOf<Cuda> {
  using type = cuda::StepVerdict;
};
#endif
template <class Device>
using StepVerdict = typename StepVerdictOf<Device>::type;
template <class Device>
inline constexpr bool verdict_on_device = !std::is_same_v<StepVerdict<Device>, NoStepVerdict>;

// A scope in which the calling thread's losses on Device leave their input checks on the device for
// the verdict (cuda::DeferInputChecks, when told to; check() says where); the host's losses check
// at once.
struct CheckInputsAtOnce {
  struct Nothing {};
  explicit CheckInputsAtOnce(bool) noexcept {}
  Nothing check() const noexcept { return {}; }
};
#if defined(__CUDACC__)
template <class Device>
using DeferInputChecks = std::conditional_t<verdict_on_device<Device>, cuda::DeferInputChecks, CheckInputsAtOnce>;
#else
template <class Device>
using DeferInputChecks = CheckInputsAtOnce;
#endif

}  // namespace etnn::backend
