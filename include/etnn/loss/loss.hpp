#pragma once
// etnn::loss, the face of loss/: fused value-and-gradient losses with PyTorch's definitions and reductions.
//   on class indices: CrossEntropy, NLL, MultiMargin; at every position of a sequence:
//   SequenceCrossEntropy
//   on targets of the output's shape: MSE, L1, SmoothL1, Huber, BCEWithLogits, BCE, Hinge, KLDiv
//   on multi-hot targets: MultiLabelSoftMargin
//   with parameters of their own, on embeddings and class indices: CosFace, ArcFace, SphereFace,
//   CenterLoss (each trained by its own optimizer, see parametric.hpp)
#include "bce.hpp"
#include "bce_with_logits.hpp"
#include "center_loss.hpp"
#include "cross_entropy.hpp"
#include "hinge.hpp"
#include "huber.hpp"
#include "kl_div.hpp"
#include "l1.hpp"
#include "margin_heads.hpp"
#include "mse.hpp"
#include "multi_margin.hpp"
#include "multilabel_soft_margin.hpp"
#include "nll.hpp"
#include "parametric.hpp"
#include "reduction.hpp"
#include "sequence_cross_entropy.hpp"
#include "smooth_l1.hpp"
#include "target_staging.hpp"
#include "targets.hpp"
