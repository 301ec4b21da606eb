#pragma once
// Which part of the model a pipeline stage holds: the transformer layers [first_layer,
// last_layer) (global indices) plus, where asked, the token (and position) embedding (the first
// stage) and the final norm + LM head + loss (the last stage), and how many of its layers
// recompute their forward in B instead of keeping their activations (spec/recompute.h).
#include "plait/spec/model_spec.h"
#include "plait/spec/unit_memory.h"

namespace plait::model {

struct StageSpec {
  int first_layer = 0;
  int last_layer = 0;  // exclusive
  bool has_embedding = false;
  bool has_head = false;
  // The stage's first this many layers keep only their input and K/V from F to B and rebuild
  // the rest just before their backward (spec/unit_memory.h, "Recomputation").
  int recompute_layers = 0;
  // The element types of its tensors (spec/precision_policy.h): fp32, or bf16 mixed precision
  // (bf16 activations and compute weights beside the fp32 master, gradients and AdamW state).
  spec::Precision precision = spec::Precision::fp32;
  // Tensor parallelism (model/tensor_parallel.h, spec/tensor_parallel_plan.h): the stage is run
  // by a TP group of this many ranks, this one its rank `tp_rank`, holding that rank's part of
  // every tensor.
  int tensor_parallel = 1;
  int tp_rank = 0;

  int layer_count() const { return last_layer - first_layer; }
  bool recomputes(int local_layer) const { return local_layer < recompute_layers; }
  // What the memory formulas need of it.
  spec::StagePart part() const {
    return {layer_count(), has_embedding, has_head, recompute_layers, tensor_parallel};
  }
  // The whole model on one stage.
  static StageSpec whole_model(const spec::ModelSpec& model) { return {0, model.layers, true, true}; }
  bool operator==(const StageSpec&) const = default;
};

// Throws plait::Error unless 0 <= first <= last <= layers, the stage holds something,
// 0 <= recompute_layers <= its layers, and the model splits over the TP group
// (spec::check_tensor_parallel) with 0 <= tp_rank < tensor_parallel.
void validate_stage_spec(const spec::ModelSpec& model, const StageSpec& spec);

}  // namespace plait::model
