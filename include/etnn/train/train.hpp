#pragma once
// The face of train/: etnn::Trainer (a training step: forward, loss, backward, reduce, update),
// etnn::evaluate with etnn::metrics, and progress reporting.
//   etnn::Trainer trainer(model, loss, opt);
//   for (auto batch : loader) trainer.step(batch);
#include "evaluate.hpp"
#include "metrics.hpp"
#include "progress.hpp"
#include "trainer.hpp"
#include "trainer_options.hpp"
