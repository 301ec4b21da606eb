#include "plait/runtime/local_trainer.h"

#include <string>
#include <vector>

#include "plait/core/error.h"
#include "plait/core/monotonic_clock.h"
#include "plait/data/document_mask.h"
#include "plait/data/segment_columns.h"
#include "plait/optim/grad_clip.h"

namespace plait::runtime {
namespace {

}  // namespace

namespace {

model::StageSpec whole_model(const spec::ModelSpec& model, spec::Precision precision) {
  model::StageSpec s = model::StageSpec::whole_model(model);
  s.precision = precision;
  return s;
}

}  // namespace

LocalTrainer::LocalTrainer(const spec::ModelSpec& model, const TrainConfig& train,
                           const spec::SequencePartition& partition, MemoryTracker& tracker)
    : train_(train),
      model_(model, whole_model(model, train.precision), tracker),
      optimizer_(model_.parameters(), optim::param_ranges(model_.tensors()),
                 {train.beta1, train.beta2, train.eps, train.weight_decay}, tracker,
                 model_.backend()),
      schedule_{train.lr, train.min_lr, train.warmup_steps, train.steps} {
  if (partition.seq() != train.seq) {
    throw Error("local trainer: a partition of " + std::to_string(partition.seq()) +
                " tokens for sequences of " + std::to_string(train.seq));
  }
  for (int i = 0; i < partition.count(); ++i) segments_.push_back(partition.segment(i));
  model_.init_parameters(train.seed);
}

StepResult LocalTrainer::step(std::int64_t step, const data::BatchSource& batches) {
  const int rows = train_.microbatch_size, seq = train_.seq, m = train_.microbatches;
  if (batches.seq() != seq || batches.microbatch_size() != rows ||
      batches.microbatches_per_step() != m) {
    throw Error("local trainer: the batch source gives " + std::to_string(batches.microbatches_per_step()) +
                " micro-batches of " + std::to_string(batches.microbatch_size()) + " x " +
                std::to_string(batches.seq()) + " tokens; the train config asks for " +
                std::to_string(m) + " of " + std::to_string(rows) + " x " + std::to_string(seq));
  }
  StepResult r;
  double t0 = monotonic_seconds();
  model_.zero_gradients();
  r.optimizer_seconds += monotonic_seconds() - t0;

  // Every target that counts (not a packed sequence's padding) weighs the same: the units'
  // scaled losses add up to the mean over the global batch (data/document_mask.h).
  const double loss_scale = 1.0 / static_cast<double>(data::counted_targets(batches, step, m));
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(rows) * seq), targets(inputs.size());
  std::vector<std::int32_t> seg_inputs, seg_targets;
  for (int mb = 0; mb < m; ++mb) {
    batches.fill(step, mb, inputs.data(), targets.data());
    std::vector<std::int32_t> documents = data::document_mask(batches.documents(step, mb), seq);
    if (!documents.empty()) model_.set_documents(mb, std::move(documents), seq);
    t0 = monotonic_seconds();
    for (const spec::Segment& s : segments_) {
      data::segment_columns(inputs, rows, seq, s.start, s.length, seg_inputs);
      data::segment_columns(targets, rows, seq, s.start, s.length, seg_targets);
      r.loss += model_.forward_loss(mb, rows, s, nullptr, seg_inputs.data(), seg_targets.data(),
                                    loss_scale);
    }
    r.forward_seconds += monotonic_seconds() - t0;
    t0 = monotonic_seconds();
    for (auto it = segments_.rbegin(); it != segments_.rend(); ++it) {
      model_.backward(mb, *it, nullptr, nullptr);
    }
    r.backward_seconds += monotonic_seconds() - t0;
  }

  t0 = monotonic_seconds();
  const auto grads = model_.gradients();
  const double sum_sq = model_.backend().sum_of_squares(grads.data(), grads.size());
  const optim::ClipResult clip = optim::clip_by_global_norm({&sum_sq, 1}, train_.grad_clip);
  r.grad_norm = clip.norm;
  r.clip_factor = clip.factor;
  r.lr = schedule_.at(static_cast<int>(step));
  optimizer_.step(grads, r.lr, clip.factor);
  model_.refresh_compute_weights();  // bf16: the compute copy of the updated master
  r.optimizer_seconds += monotonic_seconds() - t0;
  return r;
}

}  // namespace plait::runtime
