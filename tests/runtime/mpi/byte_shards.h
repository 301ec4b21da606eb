#pragma once
// Random byte tokens in a train and a validation shard under DIR/shards, written by rank 0 (the
// MPI tests that run whole TrainingRuns: rebalance_test.cpp, layer_move_test.cpp).
#include <cstdint>
#include <filesystem>
#include <random>
#include <vector>

#include "mpi_test_session.h"
#include "plait/data/token_shard.h"
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

}  // namespace plait::runtime::test
