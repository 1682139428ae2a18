#pragma once
// etnn: header-only C++20 deep learning with shapes known at compile time.
//   #include <etnn/etnn.hpp>
// One face header per folder, in the layering order (a folder includes only folders before it):
//   core < expr < tensor < cpu < cuda < backend < dist < nn < loss < optim < data < io < train
// The CUDA backend is included only under nvcc; dist/mpi and dist/nccl only on request.

#include "core/core.hpp"
#include "expr/expr.hpp"
#include "tensor/tensor.hpp"
#include "tensor/copy.hpp"
#include "cpu/cpu.hpp"
#if defined(__CUDACC__)
#include "cuda/cuda.hpp"
#endif
#include "backend/backend.hpp"
#include "dist/dist.hpp"
#include "nn/nn.hpp"
#include "loss/loss.hpp"
#include "optim/optim.hpp"
#include "data/data.hpp"
#include "io/io.hpp"
#include "train/train.hpp"
