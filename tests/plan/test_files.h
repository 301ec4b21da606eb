#pragma once
// Files for the plan tests: scratch files named after the running test (tests/support), and the
// shipped cluster specs.
#include <string>

#include "support/temp_dir.h"

namespace plait::plan {

using test::test_file;
using test::write_test_file;

inline std::string shared_cluster(const std::string& name) {
  return std::string(PLAIT_SOURCE_DIR) + "/share/clusters/" + name;
}

}  // namespace plait::plan
