#pragma once
// etnn::optim, the face of optim/: the optimizers (SGD, Adam, AdamW) over a model's flat
// parameter buffer, each finishing a step (reduce across ranks, non-finite scan, update), gradient
// clipping and learning-rate schedules.
//   etnn::optim::SGD opt(model, {.lr = 0.01f, .momentum = 0.9f});
#include "adam.hpp"
#include "grad_norm.hpp"
#include "optimizer.hpp"
#include "schedule.hpp"
#include "sgd.hpp"
