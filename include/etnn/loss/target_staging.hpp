#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// loss::detail::TargetStaging<T, Device>: a step's targets brought to a loss as its target_kind
// (targets.hpp) says: class indices as they are, targets of the output's shape staged as the
// model's scalar type on its device, in a buffer that grows to the largest batch and is reused.
// Host targets of a loss with a target_domain (Hinge's -1/+1, ...) are checked on the host as they
// are staged, so that a CUDA step does not wait for the device to check them.
#include <cstddef>
#include <span>
#include <type_traits>

#include "checks.hpp"
#include "target_loss.hpp"
#include "../tensor/buffer.hpp"
#include "../backend/staging.hpp"
#include "../tensor/tensor.hpp"
#include "targets.hpp"

namespace etnn::loss::detail {

template <class T, class Device>
class TargetStaging {
 public:
  // Sizes the buffer that converts float targets to T for `values` target values.
  void reserve(std::size_t values) {
    if constexpr (!std::is_same_v<T, float>) staging_.values.reserve_discard(values);
  }

  // The loss's mean value over the batch (on a CUDA device on its way to the host, read when
  // converted to T: backend::LossValue; a parametric loss's is a T), and dL/doutput into grad
  // (output's shape).
  template <class Loss, ShapeType S, class Y>
  auto value_and_grad(Loss& loss, TensorView<const T, S, Device> output, const Y& y, T* grad) {
    using Kind = typename Loss::target_kind;
    static_assert(check::loss_target_kind<std::is_same_v<Kind, ClassIndices> || std::is_same_v<Kind, RealValues> ||
                                          std::is_same_v<Kind, MultiHot>>());
    if constexpr (std::is_same_v<Kind, ClassIndices>) {
      static_assert(check::class_index_targets<std::is_convertible_v<const Y&, std::span<const int>>>());
      return loss.value_and_grad(Device{}, output, std::span<const int>(y), grad);
    } else {  // RealValues and MultiHot: a tensor of the output's shape
      static_assert(check::tensor_targets<requires(const Y& t) { const_view(t); }>());
      const auto targets = const_view(y);
      if constexpr (TargetDomainLoss<std::remove_cvref_t<Loss>> &&
                    std::is_same_v<typename decltype(targets)::device, Cpu>) {
        check_target_domain_of<Loss, T>(targets, output.batch());
        return loss.value_and_grad(Device{}, output, backend::stage_as<T, Device>(targets, staging_), grad,
                                   TargetsInDomain{});
      } else {
        return loss.value_and_grad(Device{}, output, backend::stage_as<T, Device>(targets, staging_), grad);
      }
    }
  }

 private:
  backend::Staging<T, Device> staging_;
};

}  // namespace etnn::loss::detail
