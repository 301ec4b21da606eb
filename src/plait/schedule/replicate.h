#pragma once
// Data parallelism as a schedule transformation: replicate(s, d) runs d copies of the pipeline
// side by side. Replica q owns ranks q*p .. q*p + p - 1, which hold the same virtual stages as
// ranks 0 .. p-1 of `s`, and runs global micro-batches q*m .. q*m + m - 1 in the same order.
// The result is an ordinary schedule whose stages each have d ranks; the validator, lowering and
// simulator need nothing special for it (they look up who runs what).
#include "plait/schedule/schedule.h"

namespace plait::schedule {

Schedule replicate(const Schedule& schedule, int replicas);

}  // namespace plait::schedule
