#pragma once
// The face of backend/: one dispatch header per op family, each including the CPU kernels always
// and the CUDA ones under nvcc, plus the run-time device choice (etnn::best_device, etnn::dispatch)
// and the staging of user data onto the model's device.
#include "attention.hpp"
#include "batch_norm.hpp"
#include "conv.hpp"
#include "dense.hpp"
#include "device_select.hpp"
#include "executor.hpp"
#include "fused_mlp.hpp"
#include "graphs.hpp"
#include "loss_loops.hpp"
#include "memory.hpp"
#include "non_finite.hpp"
#include "pool.hpp"
#include "staging.hpp"
#include "sum_of_squares.hpp"
#include "threads.hpp"
