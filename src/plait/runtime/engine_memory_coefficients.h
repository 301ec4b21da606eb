#pragma once
// The simulator's memory coefficients (sim::MemoryCoefficients) for plait's own fp32 engine,
// derived from model::unit_memory_bytes (the exact bytes a StageModel allocates per unit), so
// the simulator's per-rank activation peaks can be laid next to the runtime's measured ones:
//   - activations per token and layer: what F leaves for the unit's B (14C + 4 floats besides the
//     attention probabilities) PLUS the unit's own K/V (2C floats), which the engine also frees
//     at the end of B; the simulator's K/V prefix term is therefore 0;
//   - attention scores: 4 bytes per (head, query, visible key): the softmax probabilities;
//   - held from B to W: what B keeps for W (18C + 4 floats) plus the unit's dK/dV accumulator
//     (2C floats), freed by its W;
//   - head: the final LayerNorm output and statistics, the logits (which become dlogits) and the
//     head's input: (V + 2C + 2) floats per token, expressed as bytes per vocabulary entry;
//   - parameters, gradients and AdamW's two moments: 4 bytes each per parameter.
// Not modelled (each a few percent of a stage's peak at most, docs/runtime.md): transient
// buffers inside one layer's backward, the dK/dV accumulators of a micro-batch's other segments
// between its first B and their own, the token ids on the embedding stage.
#include "plait/model/gpt_config.h"
#include "plait/sim/memory_model.h"

namespace plait::runtime {

sim::MemoryCoefficients engine_memory_coefficients(const model::GPTConfig& model);

}  // namespace plait::runtime
