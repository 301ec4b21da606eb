#pragma once
// One GPT-2 block (pre-LN): x_mid = x + proj(attn(ln_1(x))); out = x_mid + mlp(ln_2(x_mid)),
// mlp(h) = c_proj(gelu(c_fc(h))). Its work for one unit (micro-batch, segment) is split the way
// zero-bubble pipelines schedule it (Qi et al., ICLR 2024): forward (F), backward_input (B:
// gradient of the block input) and backward_weight (W: parameter gradients, accumulated).
// The block reads the top-down llm.c way: each step is one kernel call.
#include <span>
#include <vector>

#include "plait/kernels/attention.h"
#include "plait/model/gpt_config.h"
#include "plait/model/parameter_layout.h"
#include "plait/model/tensor_pool.h"

namespace plait::model {

// Pointers to one layer's tensors inside a stage's parameter (or gradient) buffer. c_attn's
// weight (3C, C) holds the query rows first, then key and value rows.
struct BlockTensors {
  float* ln1_w;
  float* ln1_b;
  float* attn_w;
  float* attn_b;
  float* proj_w;
  float* proj_b;
  float* ln2_w;
  float* ln2_b;
  float* fc_w;
  float* fc_b;
  float* fcproj_w;
  float* fcproj_b;

  static BlockTensors locate(float* base, const std::vector<NamedTensor>& tensors, int layer);
};

// What one unit keeps for one block between its F, B and W (N = B*s rows, C = hidden, H heads,
// e = keys = segment end). Lifetimes (docs/engine.md, "Memory of a unit"):
//   from F to the end of B:  q (N,C), probs (B,H,s,e), fc_pre (N,4C); kv (N,2C) in kv_cache
//   from F to W:             x_in, ln1, atty, x_mid, ln2 (N,C each), mean1/rstd1/mean2/rstd2
//                            (N each), fc_gelu (N,4C)
//   from B to W:             dx_out, d_ln2, dx_mid, dq, d_ln1 (N,C each), d_fc_pre (N,4C)
//   dkv (N,2C) in kv_cache:  from the micro-batch's first B to this unit's W
struct BlockUnitState {
  PooledBuffer q, probs, fc_pre, kv;
  PooledBuffer x_in, ln1, mean1, rstd1, atty, x_mid, ln2, mean2, rstd2, fc_gelu;
  PooledBuffer dx_out, d_fc_pre, d_ln2, dx_mid, dq, d_ln1;
  PooledBuffer dkv;
};

class TransformerBlock {
 public:
  TransformerBlock(const GPTConfig& config, BlockTensors params, BlockTensors grads)
      : config_(config), p_(params), g_(grads) {}

  // F. saved.x_in holds the input (B,s,C); prefix: this layer's K/V of the micro-batch's
  // earlier segments, in order. Allocates the unit's state and K/V; writes the output to out.
  void forward(BlockUnitState& saved, std::span<const kernels::KVBlock<float>> prefix, int batch,
               int s, float* out, TensorPool& pool) const;

  // B. saved.dx_out holds dL/d(output). blocks: K/V with their dK/dV accumulators for all
  // positions [0, segment end), earlier segments first, this unit's last (its dkv already holds
  // what later segments left for these positions). Writes dL/d(input) to dx_in; frees the
  // state only B needed.
  void backward_input(BlockUnitState& saved, std::span<const kernels::KVBlock<float>> blocks,
                      int batch, int s, float* dx_in, TensorPool& pool) const;

  // W. Accumulates the parameter gradients and frees everything the unit kept.
  void backward_weight(BlockUnitState& saved, int batch, int s) const;

 private:
  const GPTConfig& config_;
  BlockTensors p_;
  BlockTensors g_;
};

}  // namespace plait::model
