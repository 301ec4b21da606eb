#pragma once
// A sample of text from a model while it trains (train.sample_every; docs/runtime.md,
// "Samples while training"), decoded through the job's own pipeline:
//
//   1. every rank gathers the full fp32 weights of its chunks (DistributedTrainer::
//      gather_parameters: a copy, or an all-gather inside the stage group where the weights are
//      sharded), so any sharding level and precision decodes alike, in fp32 on the master
//      weights;
//   2. the lowest holder of each virtual stage builds an fp32 copy of that stage and decodes
//      with its K/V cache (model::StageModel::decode): the prompt as one segment, then one token
//      at a time; each position's activations travel from stage v's decoder to stage v+1's as
//      point-to-point messages (nothing when both are on one rank), the last stage draws the
//      next token from its logits (runtime/generation.h) and sends it back to stage 0's
//      decoder;
//   3. the tokens are broadcast from the last stage's decoder to every rank.
//
// Data-parallel replicas and other holders take no part but in 1 and 3. Nothing the training
// step reads changes (the copies are separate models with their own pools; the draws use their
// own seed), so a run trains bit-identically with and without samples. The copies' memory is
// charged to `tracker` (the rank's), as long as the sample lasts.
#include <cstdint>
#include <span>
#include <vector>

#include "plait/comm/communicator.h"
#include "plait/core/memory_tracker.h"
#include "plait/runtime/distributed_trainer.h"
#include "plait/runtime/generation.h"

namespace plait::runtime {

// Collective over `world` (the trainer's). Returns the `count` new tokens on every rank.
std::vector<std::int32_t> sample_through_pipeline(DistributedTrainer& trainer, comm::Communicator& world,
                                                  MemoryTracker& tracker, std::span<const std::int32_t> prompt,
                                                  int count, const SamplingOptions& options);

}  // namespace plait::runtime
