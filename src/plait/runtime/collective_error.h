#pragma once
// An error that every rank of the job finds identically, with the same message, because it
// follows from values all ranks share (a plan, a reduced loss). Reporting it from every rank
// would print it N times: plait train lets rank 0 report it alone (docs/runtime.md, "Failures").
#include "plait/core/error.h"

namespace plait::runtime {

class CollectiveError : public Error {
 public:
  using Error::Error;
};

}  // namespace plait::runtime
