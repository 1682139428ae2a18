#pragma once
// etnn::dist, the face of dist/: the Reducer concept a data-parallel optimizer step talks to, the
// single-process policy dist::Local, and the cross-rank sum synchronised batch norm uses. The
// multi-process policies come on request: <etnn/dist/mpi.hpp> (dist::Mpi) and <etnn/dist/nccl.hpp>
// (dist::Nccl, under nvcc).
#include "checks.hpp"
#include "cross_rank_sum.hpp"
#include "reducer.hpp"
