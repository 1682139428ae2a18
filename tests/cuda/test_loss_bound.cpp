// The non-finite guard's loss test on the device (cuda/step_verdict.hpp) adds the loss's values
// in the host's order only where loss_may_overflow says the cheap answer is open. Here, on the
// host: wherever it says the sum cannot overflow, loss_total (the host's read of the loss) is
// finite, for losses near T's largest value, summed as rows in T and as partials in double; and
// ordinary losses never take the slow path.
#include <doctest/doctest.h>

#include <etnn/cuda/loss_total.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

using etnn::cuda::loss_may_overflow;
using etnn::cuda::loss_total;
using etnn::cuda::Sum;

namespace {

// Trials of n finite values whose magnitudes add up to near T's largest value (some sums
// overflow), checked for one T and sum kind; returns how many the bound left open.
template <class T>
int check_bound(Sum sum, std::mt19937_64& rng) {
  const double limit = static_cast<double>(std::numeric_limits<T>::max());
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  int open = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    const std::size_t n = 1 + rng() % 300;
    const double scales[] = {1.0, 0.5, 1.0 / 3.0, 3.0, 1e6, -2.0};
    const T scale = static_cast<T>(scales[rng() % 6]);
    const double spread = 0.05 + 1.5 * unit(rng);  // magnitudes adding up to 0.05x to 1.55x limit / |scale|
    const double negative = unit(rng) < 0.5 ? 0.0 : 0.2;  // half the trials all positive: some overflow
    std::vector<double> values(n);
    for (double& v : values) {
      v = (unit(rng) < negative ? -1.0 : 1.0) * spread * limit / static_cast<double>(n) * unit(rng) * 2.0 /
          std::max(1.0, std::fabs(static_cast<double>(scale)));
      if (sum == Sum::rows) v = static_cast<double>(static_cast<T>(v));  // rows arrive as T's values
    }
    std::vector<double> shuffled = values;  // the device adds magnitudes in another order
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    double magnitude = 0.0;
    for (const double v : shuffled) magnitude += std::fabs(v);
    const T total = loss_total<T>(values.data(), n, sum, scale);
    if (loss_may_overflow<T>(magnitude, n, scale)) {
      ++open;
    } else {
      INFO("n " << n << ", scale " << static_cast<double>(scale) << ", magnitude " << magnitude);
      REQUIRE(std::isfinite(static_cast<double>(total)));
    }
  }
  return open;
}

}  // namespace

TEST_CASE("the device's loss test adds the values itself only near T's largest value, and is right elsewhere") {
  std::mt19937_64 rng(7);
  for (const Sum sum : {Sum::rows, Sum::partials}) {
    const int open_float = check_bound<float>(sum, rng);
    const int open_double = check_bound<double>(sum, rng);
    // The trials straddle the limit: some are left open, most are not.
    CHECK(open_float > 500);
    CHECK(open_float < 3500);
    CHECK(open_double > 500);
    CHECK(open_double < 3500);
  }
  // Ordinary losses: never open; long sums are (past n eps = 1/4).
  CHECK_FALSE(loss_may_overflow<float>(1e6, 65536, 1.0f / 3.0f));
  CHECK_FALSE(loss_may_overflow<double>(1e300, 1 << 20, 1.0));
  CHECK(loss_may_overflow<float>(1.0, std::size_t{1} << 22, 1.0f));
  CHECK(loss_may_overflow<float>(std::numeric_limits<double>::infinity(), 4, 1.0f));
}
