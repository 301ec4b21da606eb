// The MPI session: the world it reports matches the launcher's, or is one rank without one.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "mpi_test_session.h"
#include "plait/comm/abort_job.h"
#include "plait/core/error.h"

namespace plait::comm {
namespace {

TEST(Session, WorldMatchesTheLauncher) {
  MpiSession& session = test::mpi_session();
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  EXPECT_EQ(session.launched_by_mpirun(), size != nullptr);
  if (size != nullptr && rank != nullptr) {
    EXPECT_EQ(session.size(), std::atoi(size));
    EXPECT_EQ(session.rank(), std::atoi(rank));
  } else {
    EXPECT_EQ(session.size(), 1);
    EXPECT_EQ(session.rank(), 0);
  }
  EXPECT_EQ(session.world().world_rank_of(session.rank()), session.rank());
  EXPECT_EQ(rank_prefix(), "rank " + std::to_string(session.rank()) + ": ");
}

TEST(Session, HostnameIsThisMachine) {
  char name[256] = {};
  ASSERT_EQ(gethostname(name, sizeof(name) - 1), 0);
  EXPECT_EQ(test::mpi_session().hostname(), std::string(name));
}

TEST(Session, OnlyOneSessionPerProcess) {
  try {
    MpiSession second;
    FAIL() << "a second MpiSession was created";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already initialized"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace plait::comm
