#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// What kind of targets a loss takes; the Trainer stages them accordingly.
namespace etnn::loss {

// One class index per sample: std::span<const int>. (SequenceCrossEntropy: one per position.)
struct ClassIndices {};
// The label of a position no loss counts (PyTorch's default ignore_index).
inline constexpr int ignore_index = -100;
// One real value per output element: a TensorView of the output's shape.
struct RealValues {};
// One 0 or 1 per output element (multi-label classification): a TensorView of the output's
// shape, staged like RealValues.
struct MultiHot {};

}  // namespace etnn::loss
