#pragma once
// etnn::io: model checkpoints and training states in safetensors.
#include "checkpoint.hpp"
#include "training_state.hpp"
