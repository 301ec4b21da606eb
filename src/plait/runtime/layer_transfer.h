#pragma once
// Carries out a layer move of tier (b) (layer_mover.h) between two steps, on every rank of the
// job: each rank takes its chunks' state out of the trainer (the fp32 master parameters and both
// AdamW moments, by global tensor name), the trainer is rebuilt on the new plan (its stages,
// gradient buffers, data-parallel and executor state, schedule lowered anew), the tensors that
// stay on the rank go back in, and those of the moved layers travel over MPI from their old
// holder to their new one (one message per tensor: parameters then both moments, sent through
// the sender's emulated link). The gradients need no travel: every step starts by zeroing them,
// so at a step boundary they hold nothing (the new stages' buffers are allocated zeroed). The
// optimizer's step count, the emulated device's slow-down and link as injected so far carry
// over. The supported layouts are layer_mover.h's (every stage on one rank, level 0).
#include <memory>
#include <utility>

#include "plait/comm/communicator.h"
#include "plait/core/memory_tracker.h"
#include "plait/runtime/distributed_trainer.h"
#include "plait/runtime/layer_mover.h"
#include "plait/runtime/pipeline_plan.h"

namespace plait::runtime {

struct LayerTransferTimes {
  double seconds = 0;           // the whole move
  double transfer_seconds = 0;  // of it: sending and receiving the moved tensors
};

// Collective over `world` (every rank, the same `next`). `trainer` is destroyed (before the new
// one is built, so that a rank never holds both) and the new one returned.
std::pair<std::unique_ptr<DistributedTrainer>, LayerTransferTimes> move_layers(
    std::unique_ptr<DistributedTrainer> trainer, const PipelinePlan& next, const TrainConfig& train,
    comm::Communicator& world, MemoryTracker& tracker, const TrainerOptions& options);

// The link from schedule rank `from` to `to` as the stage messages see it (through `from`'s
// emulated link): a 4-byte and a 64 KiB message, each answered by 4 bytes; the small one-way
// time is half its round trip, the large one its round trip less that half; collective over the trainer's schedule world (the other ranks wait in the reduction
// that gives every rank the times).
LinkProbe probe_link(DistributedTrainer& trainer, int from, int to);

}  // namespace plait::runtime
