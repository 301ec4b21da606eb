#pragma once
// How the model's layers are spread over the virtual stages: as evenly as possible, the first
// L % V stages taking one more. Stage 0 also holds the embedding and the last stage the final
// norm, LM head and loss.
#include <vector>

namespace plait::sim {

// Throws plait::Error if there are fewer layers than virtual stages.
std::vector<int> split_layers(int layers, int vstages);

}  // namespace plait::sim
