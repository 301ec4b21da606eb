#pragma once
// Single-process training: the whole model as one stage, one optimizer step at a time. It is
// also the reference every parallel layout must reproduce (ARCHITECTURE.md invariant 3): for a
// step, each of the M micro-batches runs through the model (as the configured segments) with
// loss scale 1 / (M * B * T), so the gradients sum to those of the mean loss over the global
// batch; then the gradients are clipped by their global norm and AdamW takes a step with the
// learning rate of the warm-up + cosine schedule.
#include <cstdint>

#include "plait/core/memory_tracker.h"
#include "plait/data/batch_source.h"
#include "plait/model/stage_model.h"
#include "plait/optim/adamw.h"
#include "plait/optim/lr_schedule.h"
#include "plait/runtime/train_config.h"

namespace plait::runtime {

struct StepResult {
  double loss = 0;         // mean cross-entropy over the step's tokens (nats)
  double grad_norm = 0;    // global gradient norm before clipping
  double clip_factor = 1;  // what the gradients were multiplied by
  double lr = 0;           // learning rate used
  // Wall time of the phases, seconds.
  double forward_seconds = 0;
  double backward_seconds = 0;
  double optimizer_seconds = 0;  // zeroing, norm, clipping and AdamW
};

class LocalTrainer {
 public:
  // Builds the model (parameters initialised from train.seed) and the optimizer; every sequence
  // runs as the segments of `partition` (RunConfig::partition()).
  LocalTrainer(const spec::ModelSpec& model, const TrainConfig& train,
               const spec::SequencePartition& partition, MemoryTracker& tracker);

  // One optimizer step (`step` counts from 0) on micro-batches 0..M-1 of `batches`, whose shape
  // must match the train config.
  StepResult step(std::int64_t step, const data::BatchSource& batches);

  model::StageModel& model() { return model_; }
  optim::AdamW& optimizer() { return optimizer_; }
  const TrainConfig& config() const { return train_; }

 private:
  TrainConfig train_;
  model::StageModel model_;
  optim::AdamW optimizer_;
  optim::LRSchedule schedule_;
  std::vector<spec::Segment> segments_;
};

}  // namespace plait::runtime
