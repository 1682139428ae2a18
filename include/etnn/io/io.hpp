#pragma once
// etnn::io, the face of io/: model checkpoints in safetensors with PyTorch's state_dict names
// (etnn::io::save, etnn::io::load), and training states that resume bitwise (save_state, load_state).
#include "checkpoint.hpp"
#include "training_state.hpp"
