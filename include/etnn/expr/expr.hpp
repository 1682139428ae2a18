#pragma once
// etnn::expr, the face of expr/: device-neutral math. Elementwise expression templates and the
// ETNN_HD functors with their derivatives, which both backends run (expr::ref(p, n) * 2.0f + ...).
#include "expression.hpp"
#include "functors.hpp"
