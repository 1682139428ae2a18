#pragma once
// Private to train/: include <etnn/train/train.hpp> or <etnn/etnn.hpp>.
// etnn::TrainerOptions: what a Trainer's step does besides forward, loss, backward and update:
// gradient accumulation, synchronised batch norm, the non-finite guard, CUDA graphs and dynamic
// loss scaling.
//   etnn::Trainer trainer(model, loss, opt, {.accumulate = 4, .max_non_finite_in_a_row = 10});
#include <optional>

#include "loss_scaler.hpp"

namespace etnn {

struct TrainerOptions {
  int accumulate = 1;  // micro-batches per optimizer step (gradient accumulation)
  // Data parallel: batch norm's statistics over the global batch of all ranks (PyTorch's
  // nn.SyncBatchNorm: N ranks with batch b then train as one process with batch N b), instead of
  // each rank's own batch (DDP's default). Costs a few small allreduces per batch-norm layer.
  bool sync_batch_norm = false;
  // The non-finite guard: before each update, the loss of every micro-batch on every rank (one
  // all-reduced count) and the gradients summed across ranks (one read) are tested; a NaN or an
  // infinity skips the update (Optimizer::skip_step) and restores the model's buffers (batch
  // norm's running statistics) to the start of the step.
  bool skip_non_finite = true;
  // Skipped steps in a row after which step() throws etnn::NonFiniteError naming the first
  // parameter tensor backward gave a non-finite gradient; 0 never throws.
  int max_non_finite_in_a_row = 3;
  // On etnn::Cuda: record the forward and the backward pass of each batch size into CUDA graphs
  // and replay them (cuda/graph.hpp); false launches every kernel each step.
  bool cuda_graphs = true;
  // Dynamic loss scaling; unset: on with LossScaling's defaults for an etnn::fp16 model, off
  // otherwise. It needs the non-finite guard (skip_non_finite), which skips overflowing steps. A
  // step skipped while the scale is above 1 and the loss finite is an overflow: it backs the scale
  // off and does not count toward max_non_finite_in_a_row. Other skipped steps (a non-finite loss,
  // or non-finite gradients at a scale of 1 or less) leave the scale and count as usual.
  std::optional<LossScaling> loss_scaling{};
};

}  // namespace etnn
