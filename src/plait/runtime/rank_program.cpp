#include "plait/runtime/rank_program.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "plait/core/error.h"
#include "plait/schedule/chunk_uses.h"
#include "plait/spec/precision_policy.h"

namespace plait::runtime {

schedule::LoweredSchedule lower_plan(const PipelinePlan& plan, std::int32_t recv_lookahead) {
  schedule::LowerOptions options;
  options.recv_lookahead = recv_lookahead;
  const std::int64_t row = std::int64_t{plan.microbatch_size} * plan.model.hidden;
  const std::vector<std::int64_t> lengths = plan.partition.lengths;
  // Activations and their gradients in the stage-message type (spec/precision_policy.h):
  // batch * segment length * hidden elements; under TP each rank of the sending stage sends its
  // sequence slice, 1/t of that with t the sending stage's degree (in pieces of 1/max(t, t') when
  // the receiving stage's degree t' differs: runtime/reshard.h).
  const auto element = static_cast<std::int64_t>(spec::bytes_of(spec::TensorClass::stage_message, plan.precision));
  const std::vector<int> degrees = plan.vstage_tensor_parallel();
  // The sizes below are indexed by virtual stage and segment: a plan whose stage list and
  // schedule disagree (a hand-edited plan in a test) is refused here, not read past its end.
  if (!degrees.empty() && degrees.size() != static_cast<std::size_t>(plan.schedule.layout.num_vstages)) {
    throw Error("the plan has " + std::to_string(degrees.size()) + " virtual stage(s) but its schedule " +
                std::to_string(plan.schedule.layout.num_vstages));
  }
  if (lengths.size() < static_cast<std::size_t>(plan.schedule.layout.num_segments)) {
    throw Error("the plan cuts " + std::to_string(lengths.size()) + " segment(s) but its schedule " +
                std::to_string(plan.schedule.layout.num_segments));
  }
  options.message_bytes = [row, lengths, element, degrees](const schedule::MessageKey& key) {
    // Activations cross boundary b from stage b, their gradients from stage b + 1.
    const std::int32_t from = key.payload == schedule::Payload::activation ? key.boundary : key.boundary + 1;
    const std::int64_t t = degrees.empty() ? 1 : degrees[static_cast<std::size_t>(from)];
    return row * lengths[static_cast<std::size_t>(key.segment)] / t * element;
  };
  return schedule::lower(plan.schedule, options);
}

RankProgram make_rank_program(const PipelinePlan& plan, const schedule::LoweredSchedule& lowered,
                              int rank, std::int64_t max_tag) {
  const schedule::Schedule& s = plan.schedule;
  const std::int32_t V = s.layout.num_vstages;
  const std::int32_t k = s.layout.num_segments;
  RankProgram program;
  program.rank = rank;
  program.lowered = &lowered;

  // This rank's messages by tag (a tag names the payload, micro-batch, segment and boundary).
  std::unordered_map<std::int64_t, std::int32_t> receives, sends;
  for (std::size_t id = 0; id < lowered.messages.size(); ++id) {
    const schedule::Message& m = lowered.messages[id];
    if (m.tag > max_tag) {
      throw Error("the schedule needs message tags up to " + std::to_string(m.tag) +
                  " but the transport allows " + std::to_string(max_tag) +
                  " (fewer micro-batches, segments or stages per step)");
    }
    if (m.dst_rank == rank) receives.emplace(m.tag, static_cast<std::int32_t>(id));
    if (m.src_rank == rank) sends.emplace(m.tag, static_cast<std::int32_t>(id));
  }

  const auto& actions = s.ranks[static_cast<std::size_t>(rank)];
  const std::int64_t row = std::int64_t{plan.microbatch_size} * plan.model.hidden;
  program.steps.resize(actions.size());
  program.posts.resize(actions.size());
  // Post positions come from the lowering (Message::post_op, an op index): translate them to
  // compute-step indices of this rank's program.
  std::vector<std::int32_t> compute_of_op(lowered.programs[static_cast<std::size_t>(rank)].size(), 0);
  {
    std::int32_t compute = 0;
    const auto& ops = lowered.programs[static_cast<std::size_t>(rank)];
    for (std::size_t op = 0; op < ops.size(); ++op) {
      compute_of_op[op] = compute;
      if (ops[op].kind == schedule::OpKind::compute) ++compute;
    }
  }

  for (std::size_t i = 0; i < actions.size(); ++i) {
    const schedule::Action& a = actions[i];
    ComputeStep& step = program.steps[i];
    step.action = a;
    step.vstage = s.layout.vstage(rank, a.chunk);
    // Under TP a stage's input and output are the rank's sequence slice (model/tensor_parallel.h),
    // 1/t with t the rank's degree, whatever the neighbours' (runtime/reshard.h).
    const std::int64_t elements =
        row * plan.partition.lengths[static_cast<std::size_t>(a.segment)] / plan.tensor_parallel(rank);
    const bool forward = a.kind == schedule::ActionKind::F;
    const bool backward_input = schedule::is_backward_input(a.kind);

    auto resolve_input = [&](schedule::Payload payload, std::int32_t boundary) {
      const std::int64_t tag = schedule::message_tag({payload, a.microbatch, a.segment, boundary}, k, V);
      step.input_elements = elements;
      if (auto it = receives.find(tag); it != receives.end()) {
        step.input_message = it->second;
        const schedule::Message& m = lowered.messages[static_cast<std::size_t>(it->second)];
        program.posts[static_cast<std::size_t>(compute_of_op[static_cast<std::size_t>(m.post_op)])]
            .push_back(it->second);
      } else {
        step.input_local = tag;  // produced by this rank's own earlier action (validated)
      }
    };
    auto resolve_output = [&](schedule::Payload payload, std::int32_t boundary) {
      const std::int64_t tag = schedule::message_tag({payload, a.microbatch, a.segment, boundary}, k, V);
      step.output_elements = elements;
      if (auto it = sends.find(tag); it != sends.end()) {
        step.output_message = it->second;
      } else {
        step.output_local = tag;
      }
    };
    if (forward && step.vstage > 0) resolve_input(schedule::Payload::activation, step.vstage - 1);
    if (backward_input && step.vstage < V - 1) resolve_input(schedule::Payload::gradient, step.vstage);
    if (forward && step.vstage < V - 1) resolve_output(schedule::Payload::activation, step.vstage);
    if (backward_input && step.vstage > 0) resolve_output(schedule::Payload::gradient, step.vstage - 1);
  }
  const std::vector<schedule::ChunkUses> uses = schedule::chunk_uses(actions, s.layout.num_chunks(rank));
  for (std::size_t c = 0; c < uses.size(); ++c) {
    const schedule::ChunkUses& u = uses[c];
    if (u.first < 0) continue;
    auto at = [&](std::int32_t i) -> ComputeStep& { return program.steps[static_cast<std::size_t>(i)]; };
    at(u.first).first_use = true;
    at(u.last).last_use = true;
    at(u.prefetch()).prefetch.push_back(static_cast<std::int32_t>(c));
    if (u.first_weight >= 0) {
      at(u.first_weight).first_weight = true;
      at(u.last_weight).finishes_chunk = true;
    }
  }
  return program;
}

}  // namespace plait::runtime
