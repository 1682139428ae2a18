#pragma once
// Private to train/: include <etnn/train/train.hpp> or <etnn/etnn.hpp>.
// Compile-time checks of the Trainer's arguments (a loss with parameters of its own needs their
// optimizer) and of evaluate's (the metric takes the dataset's kind of target).
// Each check is a consteval function whose static_assert message starts with a grep-able key
// (ETNN_...) and says how to fix it; the node that needs it writes
// `static_assert(check::something<...>());`. tests/compile_fail/ holds one program per message.

namespace etnn::train::check {

template <bool HasOptimizer>
consteval bool loss_optimizer() {
  static_assert(HasOptimizer,
                "ETNN_LOSS_OPTIMIZER: this loss has parameters of its own (a margin head's weight, "
                "CenterLoss's centers); give the Trainer an optimizer for them after the model's: "
                "etnn::optim::SGD loss_opt(loss, {.lr = 0.01f}); etnn::Trainer trainer(model, loss, opt, loss_opt)");
  return true;
}

template <bool OptimizesTheLoss>
consteval bool loss_optimizer_target() {
  static_assert(OptimizesTheLoss,
                "ETNN_LOSS_OPTIMIZER: the Trainer's fourth argument must be an optimizer of the loss's own "
                "parameters, built on the loss: etnn::optim::SGD loss_opt(loss, {...})");
  return true;
}

template <bool TakesTheTargets>
consteval bool metric_targets() {
  static_assert(TakesTheTargets,
                "ETNN_METRIC_TARGET: this metric does not take the dataset's kind of target: class indices "
                "(Dataset<X>) go with metrics::accuracy and top_k_accuracy, real-valued rows (Dataset<X, "
                "etnn::Shape<K...>>) with mean_absolute_error, mean_squared_error and r2_score, multi-hot rows "
                "(Dataset<X, etnn::data::MultiHot<K>>) with multilabel_f1 and multilabel_macro_f1");
  return true;
}

}  // namespace etnn::train::check
