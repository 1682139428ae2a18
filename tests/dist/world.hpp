#pragma once
// The MPI world of the dist test programs, set up by mpi_main.cpp.
#include <etnn/dist/mpi.hpp>

namespace etnn::test {
etnn::dist::Mpi& world();
}
