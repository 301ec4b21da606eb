#pragma once
// One transformer layer of either family, with its work for one unit (micro-batch, segment)
// split the way zero-bubble pipelines schedule it (Qi et al., ICLR 2024): forward (F),
// backward_input (B: gradient of the layer input) and backward_weight (W: parameter gradients,
// accumulated). Each family's block (gpt2_block.h, llama_block.h) reads the top-down llm.c way:
// each step is one kernel call, issued through the stage's backend (kernels/backend.h), whose
// memory its tensors and the pool's buffers are.
#include <memory>
#include <span>
#include <vector>

#include "plait/kernels/attention.h"
#include "plait/kernels/backend.h"
#include "plait/model/parameter_layout.h"
#include "plait/model/tensor_parallel.h"
#include "plait/model/tensor_pool.h"
#include "plait/spec/model_spec.h"
#include "plait/spec/sequence_partition.h"

namespace plait::model {

// What one unit keeps for one layer between its F, B and W. The stage model fills x_in (the
// layer input) before F and dx_out (dL/d(output)) before B, and hands the K/V (and dK/dV)
// buffers of a micro-batch's earlier segments to later ones; each family's state adds its saved
// tensors (lifetimes: spec/unit_memory.h).
// A layer's K/V block of one unit as the stage model hands it over: the K|V rows in the layer's
// activation type (spec/precision_policy.h) and their fp32 dK/dV accumulator (null in F).
struct KVRef {
  ConstTypedPtr kv;
  float* dkv = nullptr;
  int length = 0;
};

// The blocks as the attention kernels of element type T take them (T must be kv's type).
template <typename T>
std::vector<kernels::KVBlock<T>> typed_blocks(std::span<const KVRef> blocks) {
  std::vector<kernels::KVBlock<T>> out;
  out.reserve(blocks.size() + 1);
  for (const KVRef& b : blocks) out.push_back({b.kv.as<T>(), b.dkv, b.length});
  return out;
}

// The widths one rank of a TP group of t computes with (model/tensor_parallel.h): its query
// heads and their width (also the attention output's), its K/V heads and K width, its FFN
// columns; the whole model's at t = 1. rows(n) is its sequence slice of a unit's n rows.
struct LocalWidths {
  int t = 1, heads = 0, kv_heads = 0, q = 0, kv = 0, ffn = 0;
  static LocalWidths of(const spec::ModelSpec& model, int t) {
    return {t, model.heads / t, model.kv_heads / t, model.hidden / t, model.kv_dim() / t, model.ffn_hidden / t};
  }
  int rows(int n) const { return n / t; }
};

struct LayerState {
  LayerState() = default;
  LayerState(LayerState&&) = default;
  LayerState& operator=(LayerState&&) = default;
  virtual ~LayerState() = default;
  PooledBuffer x_in, dx_out;
  PooledBuffer kv;   // this unit's K|V rows (N, 2K), kv_cache, from F to the end of B
  PooledBuffer dkv;  // their gradient accumulator, kv_cache, from the micro-batch's first B to W
                     // (bf16: to the end of this unit's B, which rounds it into dkv_kept)
  PooledBuffer dkv_kept;  // bf16 only: the completed dK/dV, kv_cache, from this unit's B to W
  // The micro-batch's packed documents (null start: each row one document), set by the stage
  // model before F: attention's mask, and positions restarting at each document
  // (position_runs.h). Host memory the stage model holds for the micro-batch.
  kernels::DocumentMask documents;

  // Every buffer of the state, empty or not (activation offload moves the non-empty activations
  // ones between F and B: runtime/activation_offload.h). Each family's state adds its own.
  virtual void buffers(std::vector<PooledBuffer*>& out) {
    for (PooledBuffer* b : {&x_in, &dx_out, &kv, &dkv, &dkv_kept}) out.push_back(b);
  }
};

class Block {
 public:
  virtual ~Block() = default;
  virtual std::unique_ptr<LayerState> make_state() const = 0;

  // F. st.x_in holds the input (B,s,C) of segment `seg`; prefix: this layer's K/V of the
  // micro-batch's earlier segments, in order. Allocates the unit's state and K/V; writes the
  // output to out.
  virtual void forward(LayerState& st, std::span<const KVRef> prefix, int batch,
                       const spec::Segment& seg, TypedPtr out, TensorPool& pool) const = 0;

  // Recomputation (per-layer activation checkpointing, Chen et al., arXiv 1604.06174): on a
  // state whose F kept only x_in and kv (the stage model drops the rest after F), rebuilds
  // everything else F saved, just before B. The same kernels on the same inputs as F, so the
  // rebuilt tensors are bitwise F's; it runs neither the K/V projection (kv is its kept result,
  // which later segments attended to) nor the output projection (the next layer kept its
  // input). prefix: as for forward.
  virtual void recompute(LayerState& st, std::span<const KVRef> prefix, int batch,
                         const spec::Segment& seg, TensorPool& pool) const = 0;

  // B. st.dx_out holds dL/d(output). blocks: K/V with their dK/dV accumulators for all
  // positions [0, segment end), earlier segments first, this unit's last (its dkv already holds
  // what later segments left for these positions). Writes dL/d(input) to dx_in; frees the
  // state only B needed.
  virtual void backward_input(LayerState& st, std::span<const KVRef> blocks,
                              int batch, const spec::Segment& seg, TypedPtr dx_in,
                              TensorPool& pool) const = 0;

  // W. Accumulates the parameter gradients and frees everything the unit kept (pool: for the
  // tensors a TP rank gathers again).
  virtual void backward_weight(LayerState& st, int batch, const spec::Segment& seg,
                               TensorPool& pool) const = 0;
};

// The block of layer `layer` of the model's family over a stage's compute weights (fp32, or the
// bf16 copy: its type is the block's activation type) and fp32 gradient buffer (the backend's
// memory), computing with the backend's kernels; with a TP group (null: none), one rank's part
// of the layer (tensors: that rank's layout). Under TP, x_in, x_mid, the norms and their
// gradients, and the layer's input and output are the rank's sequence slice (n/t rows); q, K/V,
// the attention output and the MLP's activations all n rows of the rank's heads and columns.
std::unique_ptr<Block> make_block(const spec::ModelSpec& model, int layer, TypedPtr parameters,
                                  float* gradients, const std::vector<NamedTensor>& tensors,
                                  kernels::Backend& backend, TensorParallelGroup* tp = nullptr);

}  // namespace plait::model
