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

// A term whose inputs have a domain (BCE's probabilities): valid(y, t) is false outside it, and
// complaint(i, y, t) is the error message for element i.
template <class F, class T>
concept DomainTerm = requires(const F& f, T y, T t, std::size_t i) {
  { f.valid(y, t) } -> std::convertible_to<bool>;
  { f.complaint(i, y, t) } -> std::convertible_to<std::string>;
};

// The values a loss's targets may take (Hinge's -1/+1, MultiLabelSoftMargin's 0/1), whatever the
// outputs: valid(t) is false outside them, and complaint(i, t) is the error message for element
// i. Only the targets are read, so host targets are checked on the host as they are staged.
template <class D, class T>
concept TargetDomain = requires(const D& d, T t, std::size_t i) {
  { d.valid(t) } -> std::convertible_to<bool>;
  { d.complaint(i, t) } -> std::convertible_to<std::string>;
};

}  // namespace etnn::expr
