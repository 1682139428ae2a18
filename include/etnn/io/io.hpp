#pragma once
// etnn::io: model checkpoints in safetensors (training states: train/training_state.hpp).
#include "checkpoint.hpp"
