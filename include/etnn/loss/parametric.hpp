#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// Losses with parameters of their own (the margin heads' class weights, CenterLoss's centers), as
// pytorch-metric-learning has them: the loss owns a flat parameter buffer and a flat gradient
// buffer, is an optim::ParameterSet, gets its own optimizer and is trained by a Trainer given both:
//   etnn::loss::ArcFace<64, 10> arcface({.scale = 64, .margin = 0.5f}, /*seed=*/0);
//   etnn::optim::SGD head_opt(arcface, {.lr = 0.01f});
//   etnn::Trainer trainer(model, arcface, opt, head_opt);
// value_and_grad adds gradient_scale() dL/dparams to gradients() (accumulating until zero_grad(),
// like a model's backward); the Trainer sets the scale to 1/accumulate, as it scales dL/doutput.
// value() leaves the gradients alone.
#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <numbers>
#include <span>
#include <string>
#include <vector>

#include "../core/device.hpp"
#include "../core/random.hpp"
#include "../nn/model.hpp"
#include "../tensor/buffer.hpp"
#include "../nn/gradient_buffer.hpp"
#include "../tensor/tensor.hpp"

namespace etnn::loss {

// A loss the Trainer must zero, scale and update alongside the model.
template <class L>
concept ParametricLoss = requires(L& l, typename L::value_type scale) {
  l.parameters();
  l.gradients();
  l.zero_grad();
  l.set_gradient_scale(scale);
};

namespace detail {

// One (Rows, Cols) parameter matrix, row-major, with its gradient: the storage of a parametric
// loss over Cols-wide embeddings and Rows classes, initialised N(0, 1) (torch.nn.init.normal_ /
// torch.randn) from `seed` by Box-Muller. Derived names it (Derived::who, the loss's name, and
// Derived::tensor_name) and computes it: Derived::compute(x, labels, grad, param_grad) returns the
// loss, writing dL/dx into grad and adding gradient_scale() dL/dparams to param_grad when they are
// not null.
template <class Derived, class T, int Rows, int Cols>
class ParameterMatrix {
  static_assert(Rows > 0 && Cols > 0);

 public:
  using value_type = T;
  using device = Cpu;
  static constexpr std::size_t num_params = static_cast<std::size_t>(Rows) * Cols;
  static constexpr std::size_t flat_size = num_params;  // one tensor: nothing to align
  static constexpr std::array<std::size_t, 1> param_ends{flat_size};  // one gradient bucket

  explicit ParameterMatrix(std::uint64_t seed) : params_(num_params), grads_(num_params) {
    Rng rng(seed);
    for (std::size_t i = 0; i < num_params; i += 2) {
      const double radius = std::sqrt(-2.0 * std::log(1.0 - rng.uniform()));  // 1 - u in (0, 1]
      const double angle = 2.0 * std::numbers::pi * rng.uniform();
      params_.data()[i] = static_cast<T>(radius * std::cos(angle));
      if (i + 1 < num_params) params_.data()[i + 1] = static_cast<T>(radius * std::sin(angle));
    }
    zero_grad();
  }

  T* parameters() noexcept { return params_.data(); }
  const T* parameters() const noexcept { return params_.data(); }
  T* gradients() noexcept { return grads_.data(); }
  const T* gradients() const noexcept { return grads_.data(); }
  void zero_grad() { std::fill_n(grads_.data(), num_params, T(0)); }
  // As Model::keep_gradients_in: a data-parallel optimizer's memory, or nullptr for its own.
  void keep_gradients_in(T* storage) { grads_.keep_in(storage); }

  // The factor of dL/dparams added by value_and_grad (the Trainer's loss scale / accumulate).
  void set_gradient_scale(T scale) noexcept { gradient_scale_ = scale; }
  T gradient_scale() const noexcept { return gradient_scale_; }

  // "<tensor_name>": (Rows, Cols).
  static std::vector<NamedParameter> named_parameters() {
    return {{Derived::tensor_name, {Rows, Cols}, 0, num_params}};
  }
  // "etnn::loss::ArcFace<64, 10>": the embedding width, then the classes.
  static std::string describe() {
    std::string d = Derived::who;
    d += "<";
    d += std::to_string(Cols);
    d += ", ";
    d += std::to_string(Rows);
    d += ">";
    return d;
  }

  // Returns the loss; grad (B, Cols) receives dL/dx, and gradients() gains gradient_scale() dL/dparams.
  template <ShapeType S>
  T value_and_grad(Cpu, TensorView<const T, S, Cpu> x, std::span<const int> labels, T* grad) {
    return static_cast<const Derived*>(this)->compute(x, labels, grad, gradients());
  }
  template <ShapeType S>
  T value(Cpu, TensorView<const T, S, Cpu> x, std::span<const int> labels) const {
    return static_cast<const Derived*>(this)->compute(x, labels, static_cast<T*>(nullptr), static_cast<T*>(nullptr));
  }

 private:
  Buffer<T, Cpu> params_;
  nn::GradientBuffer<T, Cpu> grads_;
  T gradient_scale_ = 1;
};

}  // namespace detail
}  // namespace etnn::loss
