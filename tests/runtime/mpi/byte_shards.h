#pragma once
// Random byte tokens in a train and a validation shard under DIR/shards, written by rank 0 (the
// MPI tests that run whole TrainingRuns: rebalance_test.cpp, layer_move_test.cpp).
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "mpi_test_session.h"
#include "plait/data/token_shard.h"
#include "plait/runtime/parallel_config.h"
#include "shared_dir.h"

namespace plait::runtime::test {

inline void write_byte_token_shards(const SharedDir& dir) {
  comm::Communicator& world = plait::test::mpi_session().world();
  if (world.rank() == 0) {
    std::mt19937_64 rng(5);
    std::uniform_int_distribution<int> token(0, 255);
    std::vector<std::uint16_t> train(8000), val(1500);
    for (auto& t : train) t = static_cast<std::uint16_t>(token(rng));
    for (auto& t : val) t = static_cast<std::uint16_t>(token(rng));
    std::filesystem::create_directories(dir / "shards");
    data::write_token_shard(dir / "shards/t_train_000000.bin", train);
    data::write_token_shard(dir / "shards/t_val_000000.bin", val);
  }
  world.barrier();
}

// `job` as a TrainingRun on those shards (byte tokenizer, vocabulary 256) for `steps` steps,
// validating every 3 steps on one batch, checkpointing under DIR/`checkpoint` every
// `checkpoint_every` steps (0: at the end only).
inline JobConfig on_byte_shards(JobConfig job, const SharedDir& dir, const std::string& source, int steps,
                                const std::string& checkpoint, int checkpoint_every) {
  job.run.source = source;
  job.run.train.steps = steps;
  job.run.train.eval_every = 3;
  job.run.train.eval_batches = 1;
  job.run.data.paths.clear();
  job.run.data.shards = dir / "shards";
  job.run.data.tokenizer = "byte";
  job.run.model.vocab = 256;
  job.run.checkpoint = CheckpointConfig{dir / checkpoint, checkpoint_every, 0};
  return job;
}

}  // namespace plait::runtime::test
