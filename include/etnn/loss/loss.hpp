#pragma once
// etnn::loss: fused value-and-gradient losses with PyTorch's definitions and reductions.
//   on class indices: CrossEntropy, NLL, MultiMargin
//   on targets of the output's shape: MSE, L1, SmoothL1, Huber, BCEWithLogits, BCE, Hinge, KLDiv
//   on multi-hot targets: MultiLabelSoftMargin
#include "bce.hpp"
#include "bce_with_logits.hpp"
#include "cross_entropy.hpp"
#include "hinge.hpp"
#include "huber.hpp"
#include "kl_div.hpp"
#include "l1.hpp"
#include "mse.hpp"
#include "multi_margin.hpp"
#include "multilabel_soft_margin.hpp"
#include "nll.hpp"
#include "reduction.hpp"
#include "smooth_l1.hpp"
#include "targets.hpp"
