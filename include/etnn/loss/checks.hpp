#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// Compile-time checks of losses: the output they take and the kind and shape of their targets.
// Each check is a consteval function whose static_assert message starts with a grep-able key
// (ETNN_...) and says how to fix it; the node that needs it writes
// `static_assert(check::something<...>());`. tests/compile_fail/ holds one program per message.
#include <cstddef>
#include <type_traits>

namespace etnn::loss::check {

template <class Out>
consteval bool class_scores() {
  static_assert(Out::rank == 1,
                "ETNN_LOSS_SHAPE: this loss expects flat class scores (B, C); end the network "
                "with nn::linear<C> (or nn::flatten)");
  return true;
}

template <class Out>
consteval bool sequence_scores() {
  static_assert(Out::rank == 2,
                "ETNN_LOSS_SHAPE: SequenceCrossEntropy expects class scores at every position (B, T, V); "
                "end the network with nn::linear<V> over a sequence (T, D)");
  return true;
}

template <class Given, class Expected>
consteval bool target_shape() {
  static_assert(std::is_same_v<Given, Expected>,
                "ETNN_TARGET_SHAPE: the targets' per-sample shape must equal the network's "
                "output shape for this loss");
  return true;
}

template <bool KnownKind>
consteval bool loss_target_kind() {
  static_assert(KnownKind,
                "ETNN_LOSS_TARGET_KIND: the loss's target_kind must be etnn::loss::ClassIndices, "
                "etnn::loss::RealValues or etnn::loss::MultiHot (loss/targets.hpp); the Trainer stages "
                "targets by it");
  return true;
}

template <bool ClassIndices>
consteval bool class_index_targets() {
  static_assert(ClassIndices,
                "ETNN_TARGET_KIND: this loss takes class indices, one int per sample "
                "(std::vector<int>, std::span<const int>); targets of the output's shape (a Tensor) "
                "go with losses such as MSE, BCEWithLogits or MultiLabelSoftMargin");
  return true;
}

template <bool TensorTargets>
consteval bool tensor_targets() {
  static_assert(TensorTargets,
                "ETNN_TARGET_KIND: this loss takes targets of the output's shape (an etnn::Tensor or "
                "TensorView with one row per sample); class indices go with CrossEntropy, NLL or "
                "MultiMargin");
  return true;
}

template <class Out, int Embedding>
consteval bool embedding_width() {
  static_assert(Out::rank == 1 && Out::size == static_cast<std::size_t>(Embedding),
                "ETNN_LOSS_SHAPE: the network's output must be flat embeddings (B, Embedding) of the width "
                "the margin head or CenterLoss was declared with (its first template argument)");
  return true;
}

}  // namespace etnn::loss::check
