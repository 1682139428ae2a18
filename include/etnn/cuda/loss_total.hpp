#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// How a loss computed on the device adds up its values (row losses, or block partial sums), in
// one ETNN_HD function that the host's read of the loss (cuda::PendingLoss) and the non-finite
// guard's test of it on the device (cuda/step_verdict.hpp) share, so that both agree bit for bit;
// and the bound that lets the device's test skip that sequential addition for all but losses near
// T's largest value. Plain host code besides: tested on machines without a GPU.
#include <cstddef>
#include <limits>

#include "../core/config.hpp"

namespace etnn::cuda {

// The kinds of values: row losses (added in T), or block partial sums (added in double).
enum class Sum { rows, partials };

// The loss from its n values, as PendingLoss reads it on the host (and the non-finite guard's
// verdict tests it on the device, cuda/step_verdict.hpp): one function, so both agree bit for bit.
template <class T>
ETNN_HD T loss_total(const double* values, std::size_t n, Sum sum, T scale) {
  if (sum == Sum::rows) {
    T total = 0;
    for (std::size_t i = 0; i < n; ++i) total += static_cast<T>(values[i]);
    return total * scale;
  }
  double total = 0.0;
  for (std::size_t i = 0; i < n; ++i) total += values[i];
  return static_cast<T>(total) * scale;
}

// Whether loss_total of n finite values whose magnitudes add up to `magnitude` (in double, in any
// order) may fail to be finite; false promises it is finite. The partial sums of loss_total's
// addition stay within magnitude (1 + eps)^(n + 1) <= magnitude (1 + 2 (n + 1) eps) of their
// terms' magnitudes (while n eps <= 1/4; past it the bound is not worth having), so below T's
// largest value, with a factor of 2 for the rounding of `magnitude` itself and of the product, the
// sum and its product with scale are finite.
template <class T>
ETNN_HD bool loss_may_overflow(double magnitude, std::size_t n, T scale) {
  constexpr double eps = std::numeric_limits<T>::epsilon();
  if (static_cast<double>(n) * eps > 0.25) return true;
  const double scale_magnitude = scale < T(0) ? -static_cast<double>(scale) : static_cast<double>(scale);
  if (!(scale_magnitude <= std::numeric_limits<double>::max())) return true;  // NaN or infinite
  const double factor = scale_magnitude > 1.0 ? scale_magnitude : 1.0;
  return !(2.0 * magnitude * (1.0 + 2.0 * (static_cast<double>(n) + 1.0) * eps) * factor <
           static_cast<double>(std::numeric_limits<T>::max()));
}

}  // namespace etnn::cuda
