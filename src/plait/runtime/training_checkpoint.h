#pragma once
// Checkpoints of a distributed training job (docs/checkpoints.md), on a file system every rank
// sees (one machine, or a shared one):
//
//   <dir>/step_<s>/stage_<v>.safetensors   virtual stage v's tensors, by GLOBAL name: parameters
//                                          ("h.3.attn.c_attn.weight") and their AdamW moments
//                                          ("h.3.attn.c_attn.weight.adam_m", ".adam_v")
//   <dir>/step_<s>/manifest.json           step, the whole config, data position, RNG state,
//                                          optimizer step count, sizes and CRC-32C of the files
//
// Each tensor is written once: a stage held by several ranks (data-parallel replicas, several
// ranks of a heterogeneous stage) is written by the lowest of them, and the tied "wte" copy of
// the head stage (equal to the embedding's after every step) is left to stage 0's file. Because
// names are global, a checkpoint loads into any layout: each rank reads the tensors its own
// chunks hold, wherever they were written (pp 4 -> pp 2, other data-parallel widths,
// interleaved chunks, explicit heterogeneous plans).
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "plait/checkpoint/checkpoint_store.h"
#include "plait/comm/communicator.h"
#include "plait/runtime/distributed_trainer.h"
#include "plait/runtime/failure_injection.h"
#include "plait/runtime/train_config.h"

namespace plait::runtime {

// What a checkpoint records besides the tensors.
struct TrainingState {
  std::int64_t step = 0;  // steps completed: the step a resumed run starts at
  nlohmann::json config;
  nlohmann::json data_position;
  nlohmann::json rng_state;
  std::string working_directory;  // absolute; the config's relative paths resolve against it
};

// "stage_3.safetensors".
std::string stage_file_name(int vstage);

// Collective over `world` (the trainer's). Rank 0 creates the staging directory, every stage's
// lowest holder writes its file (atomically), the file records are gathered to rank 0, which
// commits (manifest, rename, `latest`, pruning to keep_last), and a barrier ends it. A rank killed
// at any point leaves the previous checkpoint as `latest`. Returns the checkpoint's directory.
// State that is not finite (a NaN or infinite parameter or moment, a negative second moment) is
// refused before anything is written: every rank throws the same CollectiveError naming the
// first bad tensor of each stage. `failure` of kind kKillInSave at this rank and state.step
// kills the rank after its files are written, before the commit; kKillInCommit kills rank 0
// after it renamed the directory, before it rewrote `latest`.
std::string save_training_checkpoint(DistributedTrainer& trainer, comm::Communicator& world,
                                     const CheckpointConfig& where, const TrainingState& state,
                                     const FailureInjection& failure = {});

// Sets parameter tensor `t` of the rank's chunk `c` to `values` (its full fp32 values) wherever
// the rank keeps it: the device weights where they are whole there, the optimizer's shard of the
// master, the bf16 compute copy. Not collective (each holder sets its own part).
void load_chunk_parameter(DistributedTrainer& trainer, int c, const model::NamedTensor& t,
                          std::span<const float> values);

// Loads the rank's chunks (parameters, AdamW moments by global name) and the optimizer step count
// from a verified checkpoint. Not collective. Errors name the checkpoint and the tensor (absent,
// another shape than the model's, a value that is not finite, a negative second moment).
void restore_training_checkpoint(DistributedTrainer& trainer, const checkpoint::CheckpointReader& reader);

}  // namespace plait::runtime
