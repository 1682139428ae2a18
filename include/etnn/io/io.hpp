#pragma once
// etnn::io: checkpoints in safetensors.
#include "checkpoint.hpp"
