#pragma once
// etnn::expr, the face of expr/: device-neutral math that both backends run. Elementwise
// expression templates and the ETNN_HD functors with their derivatives (expr::ref(p, n) * 2.0f),
// attention's row and head functors, batch norm's per-value functors, loss terms, the geometry
// of a sliding window, and the padding of a narrow MLP to the fused kernels' widths.
#include "attention.hpp"
#include "batch_norm.hpp"
#include "expression.hpp"
#include "functors.hpp"
#include "fused_mlp_padding.hpp"
#include "loss_term.hpp"
#include "window.hpp"
