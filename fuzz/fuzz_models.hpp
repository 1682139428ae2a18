#pragma once
// The models whose checkpoints seed the safetensors fuzzer (make_seeds) and that it loads into.
#include <etnn/etnn.hpp>

namespace fuzz {

namespace nn = etnn::nn;
using FloatNet = decltype(nn::input<4> >> nn::linear<3> >> nn::relu >> nn::linear<2>);
using DoubleNet = decltype(nn::input<3> >> nn::linear<2> >> nn::batch_norm >> nn::relu >> nn::linear<2>);
using FloatModel = etnn::Model<FloatNet, float, etnn::Cpu>;
using DoubleModel = etnn::Model<DoubleNet, double, etnn::Cpu>;

}  // namespace fuzz
