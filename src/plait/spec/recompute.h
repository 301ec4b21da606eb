#pragma once
// Which layers recompute their forward in B (activation recomputation, "checkpointing" per layer:
// Chen et al., arXiv 1604.06174): the value of a config's `parallel.recompute` and of a plan's
// choice, read by the runtime (each StageModel), the simulator's memory and cost models and the
// planner. A recomputed layer keeps only its input and its K/V from F to B (spec/unit_memory.h
// says why the K/V stay) and rebuilds the rest just before its own backward.
//
// Forms: none; full (every layer of every virtual stage); each (the same number of layers on
// every virtual stage: the shorthand); per_stage (one count per virtual stage: what a
// heterogeneous plan needs, since its stages differ in layers and memory). A stage recomputes
// its FIRST n layers (Megatron-LM's "block" method, recompute_num_layers per pipeline stage);
// with equal layers which ones does not change the bytes kept, and the first ones are those
// whose backward comes last, so their rebuilt state lives for the shortest time.
#include <string>
#include <vector>

namespace plait::spec {

struct Recompute {
  enum class Form { none, full, each, per_stage };
  Form form = Form::none;
  int each = 0;                // Form::each
  std::vector<int> per_stage;  // Form::per_stage: one count per virtual stage

  static Recompute full() { return {Form::full, 0, {}}; }
  static Recompute layers_each(int n) { return {Form::each, n, {}}; }
  static Recompute stages(std::vector<int> counts) { return {Form::per_stage, 0, std::move(counts)}; }

  bool any() const;
  // The layers each virtual stage recomputes, for stages of `vstage_layers` layers. Throws
  // plait::Error with a message naming the virtual stage when a count exceeds its stage's layers
  // or the per-stage list has the wrong length (callers prefix file and field).
  std::vector<int> resolve(const std::vector<int>& vstage_layers) const;
  // "none", "full", "2 layers per stage", "[2, 0, 1] layers per stage" for reports.
  std::string describe() const;

  bool operator==(const Recompute&) const = default;
};

}  // namespace plait::spec
