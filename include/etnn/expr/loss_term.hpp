#pragma once
// Private to expr/: include <etnn/expr/expr.hpp> or <etnn/etnn.hpp>.
// The value and derivative of a loss's element-wise term, device-neutral: a term is an ETNN_HD
// functor term(y, t) -> {f(y, t), df/dy}, which the CPU loop (cpu/loss_loops.hpp) and the CUDA
// kernel (cuda/loss_loops.hpp) sum alike; loss/*.hpp define the terms.
#include <concepts>
#include <cstddef>
#include <string>

#include "../core/config.hpp"

namespace etnn::expr {

// -1, 0 or 1 (PyTorch's sign: 0 at 0).
template <class T>
ETNN_HD T sign(T x) {
  return static_cast<T>((x > T(0)) - (x < T(0)));
}

// The value and gradient of one element-wise term.
template <class T>
struct Term {
  T value;
  T grad;
};

// A term whose inputs have a domain (BCE's probabilities, -1/+1 or 0/1 targets): valid(y, t) is
// false outside it, and complaint(i, y, t) is the error message for element i.
template <class F, class T>
concept DomainTerm = requires(const F& f, T y, T t, std::size_t i) {
  { f.valid(y, t) } -> std::convertible_to<bool>;
  { f.complaint(i, y, t) } -> std::convertible_to<std::string>;
};

}  // namespace etnn::expr
