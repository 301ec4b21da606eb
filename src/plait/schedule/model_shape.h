#pragma once
// The shape of a GPT-style model, as far as schedules, partitions and the simulator need it.
// (The engine's full configuration lives in model/; schedule/ must not depend on it.)
#include <cstdint>
#include <string>

namespace plait::schedule {

struct ModelShape {
  int layers = 0;
  int hidden = 0;           // H
  int heads = 0;            // n_h; head size d = H / n_h
  int vocab = 0;            // V
  std::int64_t max_seq = 0; // rows of the learned position table
  int ffn_hidden() const { return 4 * hidden; }  // F = 4H for GPT
  int head_size() const { return heads > 0 ? hidden / heads : 0; }
};

// Throws plait::Error naming the bad field (layers, hidden, heads, vocab >= 1; heads divides
// hidden).
void check_model_shape(const ModelShape& shape, const std::string& where);

}  // namespace plait::schedule
