#pragma once
// Two balancing steps of the planner.
//
// microbatch_shares: a stage's micro-batches over its devices in proportion to their speed
// (schedule/microbatch_shares.h, which the runtime's re-balancing shares).
//
// balance_layers: layers per stage minimising the slowest stage: every stage starts with one
// layer and each further layer goes to the stage whose time after taking it is smallest, among
// the stages whose devices can still hold it. For stage times that grow with their layers, this
// greedy fill is optimal for the largest time (an exchange argument: a layer moved from the
// greedy stage to any other would end at least as late). It replaces Zorse's "layers
// proportional to 1/T_G": proportional shares need rounding and ignore the LM head on the last
// stage and the memory limits, which the greedy fill sees.
#include <functional>
#include <vector>

#include "plait/schedule/microbatch_shares.h"

namespace plait::plan {

using schedule::microbatch_shares;

// time(stage, layers): seconds of the stage with that many layers; fits(stage, layers): whether
// its devices hold them. Every stage gets at least `minimum` layers (a stage of v chunks needs
// v). Empty when the layers cannot be placed (too few layers, or memory).
std::vector<int> balance_layers(int layers, int stages, const std::function<double(int, int)>& time,
                                const std::function<bool(int, int)>& fits, int minimum = 1);

}  // namespace plait::plan
