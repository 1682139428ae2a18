#pragma once
// The CUDA backend, the face of cuda/ (nvcc only): the runtime and stream, device memory, the
// expression executor, reductions, cuBLASLt products, convolution, attention, pooling, batch norm, the loss
// loops, the fully fused narrow-MLP kernels and CUDA graphs. Layers reach these through backend/.
#include "runtime.hpp"
#include "memory.hpp"
#include "pinned_staging.hpp"
#include "per_thread.hpp"
#include "executor.hpp"
#include "reduce.hpp"
#include "blas.hpp"
#include "dense.hpp"
#include "conv.hpp"
#include "attention.hpp"
#include "pool.hpp"
#include "batch_norm.hpp"
#include "loss_loops.hpp"
#include "fused_mlp.hpp"
#include "graph.hpp"
#include "non_finite.hpp"
#include "step_verdict.hpp"
#include "probe.hpp"
