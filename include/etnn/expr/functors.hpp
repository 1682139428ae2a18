#pragma once
// Private to expr/: include <etnn/expr/expr.hpp> or <etnn/etnn.hpp>.
// Elementwise functors. Each activation is a (value, derivative) pair:
//   y = f(x)                 operator()(x)
//   dy/dx = f'(x, y)         derivative(x, y)
// and backward's chain rule step, g f'(x, y), is fn::chain(f, g, x, y) (below).
// The derivative receives both the input x and the output y; when `derivative_needs_input` is
// false it reads only y, so a fused layer need not keep anything for backward. When it is true, a
// fused layer (GEMM, bias, f) keeps f'(z) itself from forward (fn::activate, below), computed
// while z is in cache and sharing work with f(z), so that backward's step is one product.
// All functors are ETNN_HD: the CPU and CUDA executors run the same definitions.
#include <cmath>
#include <cstddef>
#include <ratio>

#include "../core/config.hpp"
#include "../core/fast_math.hpp"
#include "checks.hpp"

namespace etnn::fn {

// f(x) and f'(x) together, from an activation's value_and_derivative (fn::activate).
template <class T>
struct ValueAndDerivative {
  T value;
  T derivative;
};

struct Identity {
  static constexpr const char* name = "identity";
  static constexpr bool derivative_needs_input = false;
  template <class T> ETNN_HD T operator()(T x) const { return x; }
  template <class T> ETNN_HD T derivative(T, T) const { return T(1); }
};

// relu(x) = max(x, 0); relu'(x) = [x > 0] = [y > 0] (0 at x = 0, as PyTorch)
struct Relu {
  static constexpr const char* name = "relu";
  static constexpr bool derivative_needs_input = false;
  // NaN stays NaN, as torch.relu keeps it (the NaN guard must see it downstream).
  template <class T> ETNN_HD T operator()(T x) const { return x < T(0) ? T(0) : x; }
  template <class T> ETNN_HD T derivative(T, T y) const { return y > T(0) ? T(1) : T(0); }
  // g relu'(x) as a select, PyTorch's threshold_backward: not g * 0 where the unit is off, which
  // a compiler may not speculate (0 * inf raises "invalid") and so leaves the loop unvectorised;
  // a non-finite g there gives 0, as in PyTorch.
  template <class T> ETNN_HD T chain(T g, T, T y) const { return y > T(0) ? g : T(0); }
};

// leaky_relu(x) = x if x > 0 else s x; with s >= 0, x > 0 <=> y > 0, so y suffices.
template <class Slope = std::ratio<1, 100>>
struct LeakyRelu {
  static_assert(expr::check::leaky_slope<Slope::num>());
  static constexpr const char* name = "leaky_relu";
  static constexpr bool derivative_needs_input = false;
  template <class T> static constexpr T slope = T(Slope::num) / T(Slope::den);
  template <class T> ETNN_HD T operator()(T x) const { return x > T(0) ? x : slope<T> * x; }
  template <class T> ETNN_HD T derivative(T, T y) const { return y > T(0) ? T(1) : slope<T>; }
};

// tanh'(x) = 1 - y^2
struct Tanh {
  static constexpr const char* name = "tanh";
  static constexpr bool derivative_needs_input = false;
  template <class T> ETNN_HD T operator()(T x) const { return std::tanh(x); }
  template <class T> ETNN_HD T derivative(T, T y) const { return T(1) - y * y; }
};

// sigmoid(x) = 1 / (1 + e^-x), evaluated without overflow for either sign; sigmoid' = y (1 - y)
struct Sigmoid {
  static constexpr const char* name = "sigmoid";
  static constexpr bool derivative_needs_input = false;
  template <class T> ETNN_HD T operator()(T x) const {
    if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
    const T e = std::exp(x);
    return e / (T(1) + e);
  }
  template <class T> ETNN_HD T derivative(T, T y) const { return y * (T(1) - y); }
};

// gelu(x) = x Phi(x) = x/2 (1 + erf(x / sqrt 2))   (PyTorch's exact default)
// gelu'(x) = Phi(x) + x phi(x),  phi(x) = exp(-x^2/2) / sqrt(2 pi)
// In float, erf and exp are core/fast_math's polynomials (no library call, so a layer's loop of
// them vectorises); doubles and device code call std::erf and std::exp.
// value_and_derivative shares the erf: bitwise the same as operator() and derivative() apart.
struct Gelu {
  static constexpr const char* name = "gelu";
  static constexpr bool derivative_needs_input = true;
  template <class T> ETNN_HD T operator()(T x) const { return T(0.5) * x * (T(1) + erf_term(x)); }
  template <class T> ETNN_HD T derivative(T x, T) const { return slope(x, erf_term(x)); }
  template <class T> ETNN_HD ValueAndDerivative<T> value_and_derivative(T x) const {
    const T e = erf_term(x);
    return {T(0.5) * x * (T(1) + e), slope(x, e)};
  }

 private:
  template <class T> ETNN_HD static T erf_term(T x) { return detail::fast_erf(x * T(0.70710678118654752440)); }
  // Phi(x) + x phi(x), with e = erf(x / sqrt 2)
  template <class T> ETNN_HD static T slope(T x, T e) {
    const T cdf = T(0.5) * (T(1) + e);
    const T pdf = T(0.39894228040143267794) * detail::fast_exp(T(-0.5) * x * x);
    return detail::fmadd(x, pdf, cdf);
  }
};

// silu(x) = x sigmoid(x); silu'(x) = s (1 + x (1 - s)),  s = sigmoid(x)
// value_and_derivative shares the sigmoid.
struct Silu {
  static constexpr const char* name = "silu";
  static constexpr bool derivative_needs_input = true;
  template <class T> ETNN_HD T operator()(T x) const { return x * Sigmoid{}(x); }
  template <class T> ETNN_HD T derivative(T x, T) const { return slope(x, Sigmoid{}(x)); }
  template <class T> ETNN_HD ValueAndDerivative<T> value_and_derivative(T x) const {
    const T s = Sigmoid{}(x);
    return {x * s, slope(x, s)};
  }

 private:
  template <class T> ETNN_HD static T slope(T x, T s) { return s * (T(1) + x * (T(1) - s)); }
};

// Arithmetic used by expressions.
struct Plus {
  template <class T> ETNN_HD T operator()(T a, T b) const { return a + b; }
};
struct Minus {
  template <class T> ETNN_HD T operator()(T a, T b) const { return a - b; }
};
struct Times {
  template <class T> ETNN_HD T operator()(T a, T b) const { return a * b; }
};
struct Divide {
  template <class T> ETNN_HD T operator()(T a, T b) const { return a / b; }
};
struct Negate {
  template <class T> ETNN_HD T operator()(T a) const { return -a; }
};

// The derivative of an activation as a binary functor: (x, y) -> f'(x, y).
// One step of the chain rule, dL/dx = dL/dy f'(x, y) with g = dL/dy: the activation's own
// `chain` where it has one (an exact cheaper form), else g * f'(x, y).
template <class F, class T>
ETNN_HD T chain(const F& f, T g, T x, T y) {
  if constexpr (requires { f.chain(g, x, y); }) {
    return f.chain(g, x, y);
  } else {
    return g * f.derivative(x, y);
  }
}

// A fused layer's forward step through f, from z = its product plus bias: returns y = f(z), and
// where f' needs z (kept not null then) stores f'(z) at *kept for backward (fn::chain_kept).
template <class F, class T>
ETNN_HD T activate(const F& f, T z, T* kept) {
  if constexpr (F::derivative_needs_input) {
    if constexpr (requires { f.value_and_derivative(z); }) {
      const ValueAndDerivative<T> both = f.value_and_derivative(z);
      *kept = both.derivative;
      return both.value;
    } else {
      const T y = f(z);
      *kept = f.derivative(z, y);
      return y;
    }
  } else {
    return f(z);
  }
}

// The fused layer's backward step through f at element i: dL/dz from g = dL/dy, the outputs y and
// what forward kept (f'(z) where f' needs z, else nothing: kept may be null). The same bits as
// fn::chain(f, g, z, y).
template <class F, class T>
ETNN_HD T chain_kept(const F& f, T g, const T* y, const T* kept, std::size_t i) {
  if constexpr (F::derivative_needs_input) {
    static_assert(!requires { f.chain(g, g, g); }, "etnn: a kept f'(z) replaces only g * f'(z), not a chain of its own");
    return g * kept[i];
  } else {
    return fn::chain(f, g, y[i], y[i]);
  }
}

template <class F>
struct DerivativeOf {
  F f{};
  template <class T> ETNN_HD T operator()(T x, T y) const { return f.derivative(x, y); }
};

// (g, y) -> g f'(y) through fn::chain, for an activation whose derivative reads y only.
template <class F>
struct ChainOf {
  static_assert(!F::derivative_needs_input, "ChainOf passes y for x: only for derivatives of the output");
  F f{};
  template <class T> ETNN_HD T operator()(T g, T y) const { return fn::chain(f, g, y, y); }
};

}  // namespace etnn::fn
