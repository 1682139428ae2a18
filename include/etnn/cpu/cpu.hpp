#pragma once
// The CPU backend, the face of cpu/: the expression executor, GEMM through the CPU GEMM engine
// with fused epilogues, im2col convolution, pooling, batch norm and the loss loops. Layers reach
// these through backend/.
#include "batch_norm.hpp"
#include "conv.hpp"
#include "dense.hpp"
#include "executor.hpp"
#include "loss_loops.hpp"
#include "non_finite.hpp"
#include "parallel.hpp"
#include "pool.hpp"
#include "sum_of_squares.hpp"
