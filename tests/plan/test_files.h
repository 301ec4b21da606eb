#pragma once
// Files for the plan tests: scratch files named after the running test (tests/support), and the
// shipped cluster specs.
#include <string>

#include "plait/plan/cluster_spec.h"
#include "plait/plan/planner.h"
#include "support/temp_dir.h"

namespace plait::plan {

using test::test_file;
using test::write_test_file;

inline std::string shared_cluster(const std::string& name) {
  return std::string(PLAIT_SOURCE_DIR) + "/share/clusters/" + name;
}

// One of the emulated CPU clusters (share/clusters/<cluster>) training cpu4-base.json's model on
// 32 sequences of 256 tokens per step.
inline PlanningProblem cpu4_problem(const std::string& cluster) {
  return make_problem(read_cluster_spec(shared_cluster(cluster)),
                      spec::resolve_model(shared_cluster("cpu4-base.json"), 256), 32, 256);
}

}  // namespace plait::plan
