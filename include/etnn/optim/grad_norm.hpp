#pragma once
// Private to optim/: include <etnn/optim/optim.hpp> or <etnn/etnn.hpp>.
// Gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_ (norm_type 2):
//   norm  = sqrt(sum_i g_i^2)                       g: the mean gradient over ranks, all parameters
//   scale = min(max_norm / (norm + 1e-6), 1)        multiplies every g_i (NaN when norm is NaN, as torch)
// The optimizer folds `scale` into the gradient scale of its fused update, so clipping costs one
// read of the gradients (the norm, backend/sum_of_squares.hpp) and no extra write.
#include <algorithm>

namespace etnn::optim::detail {

// clip_grad_norm_'s factor for a gradient of global norm `norm`.
inline double clip_scale(double max_norm, double norm) { return std::min(max_norm / (norm + 1e-6), 1.0); }

}  // namespace etnn::optim::detail
