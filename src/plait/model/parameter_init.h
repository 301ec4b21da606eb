#pragma once
// GPT-2 initialisation (Radford et al. 2019, section 2.3; as in nanoGPT's model.py
// _init_weights): weights and embeddings N(0, 0.02); the residual output projections
// (attn.c_proj, mlp.c_proj) N(0, 0.02 / sqrt(2 * layers)); biases 0; LayerNorm gains 1.
//
// The values depend only on (seed, tensor name, element index): each element is drawn from a
// counter-based generator keyed by hash(seed, name), so a tensor gets the same values whatever
// stage or layout holds it (and the two copies of a tied "wte" start equal).
#include <cstdint>
#include <span>

#include "plait/model/gpt_config.h"
#include "plait/model/parameter_layout.h"

namespace plait::model {

// Fills `values` (tensor.numel floats) with the tensor's initial values.
void init_tensor(std::span<float> values, const NamedTensor& tensor, const GPTConfig& config,
                 std::uint64_t seed);

}  // namespace plait::model
