#pragma once
// Private to optim/: include <etnn/optim/optim.hpp> or <etnn/etnn.hpp>.
// Checks that every rank of a data-parallel job holds the same value (the model's parameter count
// and a hash of its description) with the Reducer alone: rank 0's value is broadcast, each rank
// compares, and a count of the ranks that differ is summed; every rank reaches the same verdict,
// so all of them throw together.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "../core/error.hpp"
#include "../dist/reducer.hpp"

namespace etnn::optim::detail {

// FNV-1a, 64 bits.
constexpr std::uint64_t fingerprint(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : text) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

template <dist::Reducer R>
bool same_on_every_rank(R& reducer, std::uint64_t value) {
  // 16 bits per double: exact whatever the value.
  std::array<double, 4> root{};
  for (std::size_t digit = 0; digit < 4; ++digit) root[digit] = static_cast<double>((value >> (16 * digit)) & 0xFFFFu);
  const std::array<double, 4> mine = root;
  reducer.broadcast(root.data(), root.size(), 0);
  double differing = root == mine ? 0.0 : 1.0;
  auto pending = reducer.start_allreduce_sum(&differing, 1);
  reducer.wait(pending);
  return differing == 0.0;
}

// Throws etnn::DistError on every rank unless all ranks run the model `description` with
// `num_params` parameters.
template <dist::Reducer R>
void require_same_model(R& reducer, std::size_t num_params, const std::string& description) {
  if (reducer.size() == 1) return;
  if (!same_on_every_rank(reducer, num_params) || !same_on_every_rank(reducer, fingerprint(description)))
    throw DistError("etnn::optim: rank " + std::to_string(reducer.rank()) + " runs " + description + " (" +
                    std::to_string(num_params) + " parameters) but another rank runs a different model; every rank "
                    "must build the same network and scalar type");
}

}  // namespace etnn::optim::detail
