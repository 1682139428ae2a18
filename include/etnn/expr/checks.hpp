#pragma once
// Private to expr/: include <etnn/expr/expr.hpp> or <etnn/etnn.hpp>.
// Compile-time checks of elementwise expressions.
// Each check is a consteval function whose static_assert message starts with a grep-able key
// (ETNN_...) and says how to fix it; the node that needs it writes
// `static_assert(check::something<...>());`. tests/compile_fail/ holds one program per message.
#include <type_traits>

namespace etnn::expr::check {

template <class A, class B>
consteval bool same_scalar() {
  static_assert(std::is_same_v<A, B>,
                "ETNN_EXPR_TYPES: both operands of an expression must have the same scalar type; "
                "cast the scalar (e.g. 2.0f for float data)");
  return true;
}

template <bool Sized>
consteval bool sized_expression() {
  static_assert(Sized,
                "ETNN_EXPR_UNSIZED: an expression of scalars alone has no length; include at least one "
                "expr::ref(data, n) operand");
  return true;
}

template <long long SlopeNumerator>
consteval bool leaky_slope() {
  static_assert(SlopeNumerator >= 0, "ETNN_LEAKY_SLOPE: leaky_relu needs a non-negative slope");
  return true;
}

}  // namespace etnn::expr::check
