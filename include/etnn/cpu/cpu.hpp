#pragma once
// The CPU backend, the face of cpu/: the expression executor, GEMM through the CPU GEMM engine
// with fused epilogues, attention as blocks of GEMMs, im2col convolution, pooling, batch norm,
// the loss loops and per-thread scratch. Layers reach these through backend/.
#include "attention.hpp"
#include "batch_norm.hpp"
#include "conv.hpp"
#include "dense.hpp"
#include "executor.hpp"
#include "loss_loops.hpp"
#include "non_finite.hpp"
#include "parallel.hpp"
#include "pool.hpp"
#include "sum_of_squares.hpp"
#include "thread_scratch.hpp"
