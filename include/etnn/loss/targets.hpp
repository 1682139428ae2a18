#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// What kind of targets a loss takes; the Trainer stages them accordingly.
namespace etnn::loss {

// One class index per sample: std::span<const int>.
struct ClassIndices {};
// One real value per output element: a TensorView of the output's shape.
struct RealValues {};
// One 0 or 1 per output element (multi-label classification): a TensorView of the output's
// shape, staged like RealValues.
struct MultiHot {};

}  // namespace etnn::loss
