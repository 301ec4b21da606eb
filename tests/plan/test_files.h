#pragma once
// Files for the plan tests: written under the test's temporary directory, named after the
// running test so that ctest can run tests side by side.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace plait::plan {

inline std::string test_file(const std::string& name) {
  return testing::TempDir() + "/plait_plan_" + testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
         name;
}

inline std::string write_test_file(const std::string& name, const std::string& text) {
  const std::string path = test_file(name);
  std::ofstream(path) << text;
  return path;
}

inline std::string shared_cluster(const std::string& name) {
  return std::string(PLAIT_SOURCE_DIR) + "/share/clusters/" + name;
}

}  // namespace plait::plan
