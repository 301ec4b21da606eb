#pragma once
// A directory shared by a multi-rank test's ranks (all on this machine): named after mpirun's
// pid, which is every rank's parent; rank 0 creates it afresh and removes it at the end.
#include <gtest/gtest.h>
#include <unistd.h>

#include <exception>
#include <filesystem>
#include <string>

#include "mpi_test_session.h"

namespace plait::runtime::test {

class SharedDir {
 public:
  explicit SharedDir(const std::string& what) {
    path_ = std::filesystem::temp_directory_path() /
            ("plait_ckpt_" + what + "_" + std::to_string(::getppid()) + "_" + std::to_string(world().size()));
    if (world().rank() == 0) {
      std::filesystem::remove_all(path_);
      std::filesystem::create_directories(path_);
    }
    world().barrier();
  }
  ~SharedDir() {
    // After a failure the job is about to abort (mpi_gtest_main.cpp); a barrier here could wait
    // for ranks that never come.
    if (std::uncaught_exceptions() > 0 || ::testing::Test::HasFailure()) return;
    world().barrier();
    if (world().rank() == 0) std::filesystem::remove_all(path_);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  static comm::Communicator& world() { return plait::test::mpi_session().world(); }
  std::filesystem::path path_;
};

}  // namespace plait::runtime::test
