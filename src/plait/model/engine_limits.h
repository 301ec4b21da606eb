#pragma once
// The sizes the CPU engine accepts, narrower than what a model description may say (the
// simulator and planner take any size): every row offset fits an int and every buffer a size_t
// on a 64-bit machine. Checked when a training config is read, before anything is allocated.
#include <string>

#include "plait/spec/model_spec.h"

namespace plait::model {

// Throws InputError(file, "model.<field>", ...) for the first size beyond the engine's limits:
// layers <= 1024, hidden <= 65536, heads <= 1024, ffn_hidden <= 262144, vocab <= 2^20,
// max_seq <= 2^20.
void check_engine_limits(const spec::ModelSpec& model, const std::string& file);

}  // namespace plait::model
