#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// What every loss builds on: the public value_and_grad/value pair on either device, for a loss
// whose targets are a tensor of the output's shape (TensorTargetLoss) and for one on class indices
// (LabelTargetLoss), and the names a loss's terms and rows use.
#include <concepts>
#include <cstddef>
#include <span>

#include "../backend/loss_loops.hpp"
#include "../core/device.hpp"
#include "../expr/loss_term.hpp"
#include "../tensor/tensor.hpp"
#include "checks.hpp"
#include "reduction.hpp"
#include "target_checks.hpp"

namespace etnn::loss::detail {

// Element-wise terms (expr/loss_term.hpp) return Term, a DomainTerm checks its inputs.
using expr::DomainTerm;
using expr::sign;
using expr::Term;

// What a loss on class indices gives both devices' row loops: the host class weights (or null),
// the reduction's scale and its row functor.
template <class T, class Row>
struct LabelRowPlan {
  const float* weight;
  T scale;
  Row row;
};

// Passed to TensorTargetLoss::value_and_grad by a caller that has checked the targets against the
// loss's target_domain itself (loss/target_staging.hpp, on the host as it stages them).
struct TargetsInDomain {};

// A loss whose targets may take only some values declares them: `using target_domain = D;` with D
// an expr::TargetDomain.
template <class Loss>
concept HasTargetDomain = requires { typename Loss::target_domain; };

// Loss's targets (a view on either device) checked against its target_domain, as its scalar type T
// sees them, when there is one row of them per output row (else the loss's shape check names the
// mismatch).
template <class Loss, class T, class TargetView>
void check_target_domain_of(const TargetView& target, int output_batch) {
  if (target.batch() == output_batch) check_target_domain<T>(target, typename Loss::target_domain{});
}

// The public pair of a loss whose targets are a tensor of the output's shape (RealValues,
// MultiHot), from its private `compute(device, output, target, grad)` (grad null: the value
// alone), which a loss defines for any device. A loss with a target_domain has its targets
// checked first (check_target_domain: on a CUDA device a wait), unless the caller did.
template <class Loss>
struct TensorTargetLoss {
  // Returns the loss (backend::LossValue: on a CUDA device, read when converted to T); grad (the
  // output's size) receives dL/doutput.
  template <class T, ShapeType S, ShapeType TS, class Device>
  backend::LossValue<T, Device> value_and_grad(Device, TensorView<const T, S, Device> output,
                                               TensorView<const T, TS, Device> target, T* grad) const {
    if constexpr (HasTargetDomain<Loss>) check_target_domain_of<Loss, T>(target, output.batch());
    return value_and_grad(Device{}, output, target, grad, TargetsInDomain{});
  }
  template <class T, ShapeType S, ShapeType TS, class Device>
  backend::LossValue<T, Device> value_and_grad(Device, TensorView<const T, S, Device> output,
                                               TensorView<const T, TS, Device> target, T* grad, TargetsInDomain) const {
    return static_cast<const Loss&>(*this).compute(Device{}, output, target, grad);
  }
  template <class T, ShapeType S, ShapeType TS, class Device>
  T value(Device, TensorView<const T, S, Device> output, TensorView<const T, TS, Device> target) const {
    return value_and_grad(Device{}, output, target, static_cast<T*>(nullptr));
  }
};

// A TensorTargetLoss with a target_domain: a caller may check its targets itself (TargetsInDomain).
template <class Loss>
concept TargetDomainLoss = HasTargetDomain<Loss> && std::derived_from<Loss, TensorTargetLoss<Loss>>;

// The same pair for a loss on class indices (ClassIndices), whose rows are independent, from its
// private `plan<T>(labels, batch, classes)` (checks the labels; returns a LabelRowPlan), through
// label_rows_loss on either device (backend/loss_loops.hpp).
template <class Loss>
struct LabelTargetLoss {
  template <class T, ShapeType S, class Device>
  backend::LossValue<T, Device> value_and_grad(Device, TensorView<const T, S, Device> output,
                                               std::span<const int> labels, T* grad) const {
    static_assert(check::class_scores<S>());
    const auto p = loss().template plan<T>(labels, output.batch(), S::dims[0]);
    return label_rows_loss(Device{}, scratch_, output.data(), output.batch(), S::dims[0], labels, p.weight, grad,
                           p.scale, p.row, Loss::who);
  }
  template <class T, ShapeType S, class Device>
  T value(Device, TensorView<const T, S, Device> output, std::span<const int> labels) const {
    return value_and_grad(Device{}, output, labels, static_cast<T*>(nullptr));
  }

 private:
  const Loss& loss() const { return static_cast<const Loss&>(*this); }
  // The device's copies of labels and row losses; nothing (and no size) in a host build.
  [[no_unique_address]] mutable backend::LabelRowsScratch scratch_;
};

}  // namespace etnn::loss::detail
