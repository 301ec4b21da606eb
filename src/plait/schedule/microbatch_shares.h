#pragma once
// A stage's micro-batches over the ranks of its data-parallel group in proportion to their speed
// (Zorse, arXiv 2507.10392: n_g ~ 1/(f_g + b_g)), largest remainders first, ties and leftovers
// to the fastest, every rank at least one (a rank without micro-batches would never start its
// gradient reduction). The planner splits a stage's micro-batches with it from profiles
// (plan/load_balance.h), the runtime's re-balancing from measured speeds (runtime/
// share_rebalancer.h).
#include <vector>

namespace plait::schedule {

// Empty when total < the number of ranks (each needs one micro-batch).
std::vector<int> microbatch_shares(int total, const std::vector<double>& speed);

}  // namespace plait::schedule
