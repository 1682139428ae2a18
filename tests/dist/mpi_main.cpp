// doctest under mpirun: every rank runs every test case (they call collectives together); rank 0
// reports in full, the others only their failures. The exit code is non-zero on every rank if
// any rank failed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "world.hpp"

namespace {
etnn::dist::Mpi* the_world = nullptr;
}

etnn::dist::Mpi& etnn::test::world() { return *the_world; }

int main(int argc, char** argv) {
  etnn::dist::Mpi mpi(argc, argv);
  the_world = &mpi;
  doctest::Context context(argc, argv);
  if (mpi.rank() != 0) context.setOption("minimal", true);
  int failed = context.run() != 0 ? 1 : 0;
  mpi.allreduce_sum(&failed, 1);
  return failed != 0 ? 1 : 0;
}
