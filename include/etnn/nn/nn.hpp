#pragma once
// etnn::nn, the face of nn/: layer specs composed with >>, Sequential and the combinators
// (residual, concat), the model (etnn::Model: parameters, forward), and its summary.
//   constexpr auto mlp = nn::input<784> >> nn::linear<512> >> nn::relu >> nn::linear<10>;
//   etnn::Model<decltype(mlp)> model{0};
#include "checks.hpp"
#include "concat.hpp"
#include "model.hpp"
#include "residual.hpp"
#include "sequential.hpp"
#include "specs.hpp"
#include "summary.hpp"
#include "training_pass.hpp"
