#pragma once
// Checks that every rank of a data-parallel job holds the same value (the model's parameter count
// and a hash of its description), with nothing but the Reducer's allreduce: each rank adds its
// value and its square, 16 bits at a time so that every sum is exact in double precision. All
// values equal x exactly when sum^2 == size * sum of squares (Cauchy-Schwarz), and every rank
// reaches the same verdict, so all of them throw together.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "../core/error.hpp"
#include "../core/reducer.hpp"

namespace etnn::optim::detail {

// FNV-1a, 64 bits.
constexpr std::uint64_t fingerprint(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : text) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

template <Reducer R>
bool same_on_every_rank(R& reducer, std::uint64_t value) {
  std::array<double, 8> sums{};
  for (int digit = 0; digit < 4; ++digit) {
    const auto v = static_cast<double>((value >> (16 * digit)) & 0xFFFFu);
    sums[static_cast<std::size_t>(2 * digit)] = v;
    sums[static_cast<std::size_t>(2 * digit + 1)] = v * v;
  }
  auto pending = reducer.start_allreduce_sum(sums.data(), sums.size());
  reducer.wait(pending);
  const double ranks = reducer.size();
  for (std::size_t digit = 0; digit < 4; ++digit)
    if (sums[2 * digit] * sums[2 * digit] != ranks * sums[2 * digit + 1]) return false;
  return true;
}

// Throws etnn::DistError on every rank unless all ranks run the model `description` with
// `num_params` parameters.
template <Reducer R>
void require_same_model(R& reducer, std::size_t num_params, const std::string& description) {
  if (reducer.size() == 1) return;
  if (!same_on_every_rank(reducer, num_params) || !same_on_every_rank(reducer, fingerprint(description)))
    throw DistError("etnn::optim: rank " + std::to_string(reducer.rank()) + " runs " + description + " (" +
                    std::to_string(num_params) + " parameters) but another rank runs a different model; every rank "
                    "must build the same network and scalar type");
}

}  // namespace etnn::optim::detail
