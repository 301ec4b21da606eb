#pragma once
// What a rank holds of a training run's state after it, for comparing runs: per chunk, the full
// parameters (gathered where level 3 shards them: collective over the stage groups) followed by
// the rank's AdamW moments (its shard where they are sharded).
#include <span>
#include <vector>

#include "plait/runtime/distributed_trainer.h"

namespace plait::runtime::test {

inline std::vector<std::vector<float>> training_state(DistributedTrainer& trainer) {
  const std::vector<std::vector<float>> parameters = trainer.gather_parameters();
  std::vector<std::vector<float>> state;
  for (int c = 0; c < trainer.num_chunks(); ++c) {
    std::vector<float> all = parameters[static_cast<std::size_t>(c)];
    for (std::span<const float> part : {std::span<const float>(trainer.optimizer(c).first_moment()),
                                        std::span<const float>(trainer.optimizer(c).second_moment())}) {
      all.insert(all.end(), part.begin(), part.end());
    }
    state.push_back(std::move(all));
  }
  return state;
}

}  // namespace plait::runtime::test
