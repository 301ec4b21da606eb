#include "plait/sim/stage_layers.h"

#include <string>

#include "plait/core/error.h"

namespace plait::sim {

std::vector<int> split_layers(int layers, int vstages) {
  if (vstages < 1 || layers < vstages) {
    throw Error("cannot place " + std::to_string(layers) + " layers on " + std::to_string(vstages) +
                " virtual stages: each stage needs at least one layer (lower --pp or --chunks)");
  }
  std::vector<int> split(vstages, layers / vstages);
  for (int s = 0; s < layers % vstages; ++s) ++split[s];
  return split;
}

}  // namespace plait::sim
