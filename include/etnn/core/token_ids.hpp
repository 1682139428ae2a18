#pragma once
// Private to core/: include <etnn/core/core.hpp> or <etnn/etnn.hpp>.
// The check that token ids in host memory fit their Tokens<T, V> shape: every id an integer in
// [0, V). nn::embedding runs it on every CPU forward; data::Dataset runs it once on its samples, so
// that ids staged to a device (where the layer cannot throw) were checked on the host.
#include <cmath>
#include <cstddef>
#include <string>

#include "config.hpp"
#include "error.hpp"

namespace etnn::detail {

// Whether id is an integer in [0, V) (false for a NaN), on the host or the device.
template <class Scalar>
ETNN_HD constexpr bool valid_token_id(Scalar id, int vocabulary) {
  return id >= Scalar(0) && id < Scalar(vocabulary) && static_cast<Scalar>(static_cast<long long>(id)) == id;
}

// Throws ShapeError unless each of the n ids (samples of T, position-major) is an integer in
// [0, V), naming the first that is not by its sample and position.
template <int T, int V, class Scalar>
void check_token_ids(const Scalar* ids, std::size_t n, const char* who) {
  for (std::size_t i = 0; i < n; ++i) {
    if (valid_token_id(ids[i], V)) continue;
    throw ShapeError(message(who, "token id ", std::to_string(static_cast<double>(ids[i])), " of sample ",
                             std::to_string(i / T), ", position ", std::to_string(i % T), " is outside [0, ",
                             std::to_string(V), "); the network's nn::input_tokens<", std::to_string(T), ", ",
                             std::to_string(V), "> takes ", std::to_string(V),
                             " ids (or the data was not tokenised with this vocabulary)"));
  }
}

}  // namespace etnn::detail
