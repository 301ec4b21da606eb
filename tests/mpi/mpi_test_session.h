#pragma once
// The MPI session of a multi-rank GoogleTest executable (made by mpi_gtest_main.cpp).
#include "plait/comm/mpi_session.h"

namespace plait::test {

plait::comm::MpiSession& mpi_session();

}  // namespace plait::test
