#pragma once
// Private to expr/: include <etnn/expr/expr.hpp> or <etnn/etnn.hpp>.
// Elementwise expression templates. An expression is a tree of nodes held by value; evaluating
// it element by element (e[i]) fuses the whole tree into one pass, done by an executor
// (cpu/executor.hpp, and the CUDA one, which passes the tree by value into one kernel).
//
//   assign(dst, ref(dy) * derivative<fn::Tanh>(ref(x), ref(y)));   // one loop, no temporaries
#include <cstddef>
#include <string>
#include <type_traits>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "checks.hpp"
#include "functors.hpp"

namespace etnn::expr {

// Tag base: only types deriving from it take part in the operators below.
struct Node {};

template <class E>
concept Expression = std::is_base_of_v<Node, E> && requires(const E& e, std::size_t i) {
  typename E::value_type;
  { e[i] } -> std::convertible_to<typename E::value_type>;
};

// A scalar broadcast to any length; its size adapts to the other operand.
template <class T>
struct Scalar : Node {
  using value_type = T;
  static constexpr bool sized = false;
  T value;
  ETNN_HD T operator[](std::size_t) const { return value; }
  std::size_t size() const { return 0; }
};

// A read-only array of n elements.
template <class T>
struct Ref : Node {
  using value_type = T;
  static constexpr bool sized = true;
  const T* data;
  std::size_t n;
  ETNN_HD T operator[](std::size_t i) const { return data[i]; }
  std::size_t size() const { return n; }
};

template <class F, Expression E>
struct Unary : Node {
  using value_type = typename E::value_type;
  static constexpr bool sized = E::sized;
  F f;
  E e;
  ETNN_HD value_type operator[](std::size_t i) const { return f(e[i]); }
  std::size_t size() const { return e.size(); }
};

template <class F, Expression L, Expression R>
struct Binary : Node {
  static_assert(check::same_scalar<typename L::value_type, typename R::value_type>());
  using value_type = typename L::value_type;
  static constexpr bool sized = L::sized || R::sized;
  F f;
  L l;
  R r;
  ETNN_HD value_type operator[](std::size_t i) const { return f(l[i], r[i]); }
  std::size_t size() const { return L::sized ? l.size() : r.size(); }
};

template <class T>
Ref<T> ref(const T* data, std::size_t n) {
  return {{}, data, n};
}

template <class T>
Scalar<T> scalar(T value) {
  return {{}, value};
}

namespace detail {
template <class F, Expression L, Expression R>
Binary<F, L, R> make_binary(const L& l, const R& r, F f = F{}) {
  if constexpr (L::sized && R::sized) {
    if (l.size() != r.size())
      throw ShapeError("etnn::expr: operands have " + std::to_string(l.size()) + " and " +
                       std::to_string(r.size()) + " elements; elementwise operands must match");
  }
  return {{}, f, l, r};
}

// Lifts an arithmetic scalar to a Scalar node of the expression's type.
template <class T, class V>
auto lift(const V& v) {
  if constexpr (Expression<V>) {
    return v;
  } else {
    return scalar(static_cast<T>(v));
  }
}

template <class A, class B>
struct CommonValue;
template <Expression A, class B>
struct CommonValue<A, B> {
  using type = typename A::value_type;
};
template <class A, Expression B>
  requires(!Expression<A>)
struct CommonValue<A, B> {
  using type = typename B::value_type;
};

template <class A, class B>
concept Operands = (Expression<A> && (Expression<B> || std::is_arithmetic_v<B>)) ||
                   (std::is_arithmetic_v<A> && Expression<B>);

template <class F, class A, class B>
auto binary(const A& a, const B& b) {
  using T = typename CommonValue<A, B>::type;
  return make_binary<F>(lift<T>(a), lift<T>(b));
}
}  // namespace detail

template <class A, class B>
  requires detail::Operands<A, B>
auto operator+(const A& a, const B& b) {
  return detail::binary<fn::Plus>(a, b);
}
template <class A, class B>
  requires detail::Operands<A, B>
auto operator-(const A& a, const B& b) {
  return detail::binary<fn::Minus>(a, b);
}
template <class A, class B>
  requires detail::Operands<A, B>
auto operator*(const A& a, const B& b) {
  return detail::binary<fn::Times>(a, b);
}
template <class A, class B>
  requires detail::Operands<A, B>
auto operator/(const A& a, const B& b) {
  return detail::binary<fn::Divide>(a, b);
}
template <Expression E>
Unary<fn::Negate, E> operator-(const E& e) {
  return {{}, fn::Negate{}, e};
}

// f applied to every element: apply<fn::Relu>(ref(x, n)).
template <class F, Expression E>
Unary<F, E> apply(const E& e, F f = F{}) {
  return {{}, f, e};
}

// f'(x, y) elementwise, for the backward pass of an activation.
template <class F, Expression X, Expression Y>
auto derivative(const X& x, const Y& y, F f = F{}) {
  return detail::make_binary(x, y, fn::DerivativeOf<F>{f});
}

// g f'(x, y) elementwise (fn::chain), backward's step through an activation.
template <class F, Expression G, Expression X, Expression Y>
auto chain(const G& g, const X& x, const Y& y, F f = F{}) {
  if constexpr (F::derivative_needs_input) {
    return g * derivative(x, y, f);
  } else {
    return detail::make_binary(g, y, fn::ChainOf<F>{f});
  }
}

}  // namespace etnn::expr
