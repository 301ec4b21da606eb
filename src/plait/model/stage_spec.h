#pragma once
// Which part of the model a pipeline stage holds: the transformer blocks [first_layer,
// last_layer) (global indices) plus, where asked, the token/position embedding (the first stage)
// and the final LayerNorm + LM head + loss (the last stage).
#include "plait/model/gpt_config.h"

namespace plait::model {

struct StageSpec {
  int first_layer = 0;
  int last_layer = 0;  // exclusive
  bool has_embedding = false;
  bool has_head = false;

  int layer_count() const { return last_layer - first_layer; }
  // The whole model on one stage.
  static StageSpec whole_model(const GPTConfig& config) {
    return {0, config.layers, true, true};
  }
  bool operator==(const StageSpec&) const = default;
};

// Throws plait::Error unless 0 <= first <= last <= layers and the stage holds something.
void validate_stage_spec(const GPTConfig& config, const StageSpec& spec);

}  // namespace plait::model
