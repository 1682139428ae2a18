#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// Multi-label one-versus-all loss on logits (PyTorch's MultiLabelSoftMarginLoss), value and
// gradient in one pass, stable for any finite logit.
//   z: (B, C) logits   t: (B, C) multi-hot, t_bc in {0, 1}
//   l_b = -1/C sum_c [ t_bc log sigma(z_bc) + (1 - t_bc) log sigma(-z_bc) ]
//       =  1/C sum_c [ max(z_bc, 0) - z_bc t_bc + log1p(exp(-|z_bc|)) ]
//   loss = r sum_b l_b       r = 1/B (mean) or 1 (sum)
//   dL/dz_bc = r / C (sigma(z_bc) - t_bc)
// The same terms as BCEWithLogits, averaged over the classes of a sample.
#include <cstddef>
#include <string>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "checks.hpp"
#include "../tensor/tensor.hpp"
#include "bce_with_logits.hpp"
#include "target_loss.hpp"
#include "targets.hpp"

namespace etnn::loss {

namespace detail {
// BCEWithLogits' term of one logit.
struct MultiLabelSoftMarginTerm {
  template <class T>
  ETNN_HD Term<T> operator()(T z, T t) const {
    return bce_with_logits_term(z, t, T(1));
  }
};
// MultiLabelSoftMargin's targets: 0 or 1; another is an error.
struct MultiHotTargets {
  template <class T>
  ETNN_HD bool valid(T t) const {
    return t == T(0) || t == T(1);
  }
  template <class T>
  std::string complaint(std::size_t i, T t) const {
    return binary_target_complaint("etnn::loss::MultiLabelSoftMargin", i, t, T(0), T(1));
  }
};
}  // namespace detail

struct MultiLabelSoftMarginOptions {
  Reduction reduction = Reduction::mean;
};

class MultiLabelSoftMargin : public detail::TensorTargetLoss<MultiLabelSoftMargin> {
 public:
  using target_kind = MultiHot;
  using target_domain = detail::MultiHotTargets;
  using Options = MultiLabelSoftMarginOptions;

  explicit MultiLabelSoftMargin(Options options = {}) : options_(options) {}
  const Options& options() const noexcept { return options_; }

 private:
  friend detail::TensorTargetLoss<MultiLabelSoftMargin>;

  template <class Device, class T, ShapeType S, ShapeType TS>
  auto compute(Device device, TensorView<const T, S, Device> logits, TensorView<const T, TS, Device> target, T* grad) const {
    static_assert(check::class_scores<S>());
    detail::check_targets(logits, target, "etnn::loss::MultiLabelSoftMargin");
    constexpr auto classes = static_cast<std::size_t>(S::dims[0]);
    const T scale = detail::reduction_scale<T>(options_.reduction, static_cast<std::size_t>(logits.batch())) /
                    static_cast<T>(classes);
    return elementwise_loss(device, logits, target, grad, scale, detail::MultiLabelSoftMarginTerm{});
  }

  Options options_;
};

}  // namespace etnn::loss
