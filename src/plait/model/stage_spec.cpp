#include "plait/model/stage_spec.h"

#include <string>

#include "plait/core/error.h"
#include "plait/spec/tensor_parallel_plan.h"

namespace plait::model {

void validate_stage_spec(const spec::ModelSpec& config, const StageSpec& spec) {
  if (spec.first_layer < 0 || spec.first_layer > spec.last_layer ||
      spec.last_layer > config.layers) {
    throw Error("stage layers [" + std::to_string(spec.first_layer) + ", " +
                std::to_string(spec.last_layer) + ") are not a range inside the model's " +
                std::to_string(config.layers) + " layers");
  }
  if (spec.layer_count() == 0 && !spec.has_embedding && !spec.has_head) {
    throw Error("a stage must hold at least one layer, the embedding or the head");
  }
  if (spec.recompute_layers < 0 || spec.recompute_layers > spec.layer_count()) {
    throw Error("stage layers [" + std::to_string(spec.first_layer) + ", " +
                std::to_string(spec.last_layer) + "): cannot recompute " +
                std::to_string(spec.recompute_layers) + " of its " +
                std::to_string(spec.layer_count()) + " layers");
  }
  spec::check_tensor_parallel(config, spec.tensor_parallel);
  if (spec.tp_rank < 0 || spec.tp_rank >= spec.tensor_parallel) {
    throw Error("tensor-parallel rank " + std::to_string(spec.tp_rank) + " of a group of " +
                std::to_string(spec.tensor_parallel));
  }
}

}  // namespace plait::model
