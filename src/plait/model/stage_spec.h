#pragma once
// Which part of the model a pipeline stage holds: the transformer layers [first_layer,
// last_layer) (global indices) plus, where asked, the token (and position) embedding (the first
// stage) and the final norm + LM head + loss (the last stage).
#include "plait/spec/model_spec.h"
#include "plait/spec/unit_memory.h"

namespace plait::model {

struct StageSpec {
  int first_layer = 0;
  int last_layer = 0;  // exclusive
  bool has_embedding = false;
  bool has_head = false;

  int layer_count() const { return last_layer - first_layer; }
  // What the memory formulas need of it.
  spec::StagePart part() const { return {layer_count(), has_embedding, has_head}; }
  // The whole model on one stage.
  static StageSpec whole_model(const spec::ModelSpec& model) { return {0, model.layers, true, true}; }
  bool operator==(const StageSpec&) const = default;
};

// Throws plait::Error unless 0 <= first <= last <= layers and the stage holds something.
void validate_stage_spec(const spec::ModelSpec& model, const StageSpec& spec);

}  // namespace plait::model
