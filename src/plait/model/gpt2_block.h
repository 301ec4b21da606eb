#pragma once
// One GPT-2 block (pre-LN): x_mid = x + proj(attn(ln_1(x))); out = x_mid + mlp(ln_2(x_mid)),
// mlp(h) = c_proj(gelu(c_fc(h))), causal multi-head attention, every linear layer biased.
// T is the activation type (float, or bf16 under mixed precision: spec/precision_policy.h);
// statistics, weight gradients and dK/dV accumulators are fp32 either way.
#include "plait/model/block.h"

namespace plait::model {

// Pointers to one layer's tensors inside a stage's parameter (or gradient) buffer. c_attn's
// weight (3C, C) holds the query rows first, then key and value rows (a TP rank's part: its q,
// then its k, then its v rows, (3C/t, C)).
template <typename W>
struct Gpt2Tensors {
  W* ln1_w;
  W* ln1_b;
  W* attn_w;
  W* attn_b;
  W* proj_w;
  W* proj_b;
  W* ln2_w;
  W* ln2_b;
  W* fc_w;
  W* fc_b;
  W* fcproj_w;
  W* fcproj_b;

  static Gpt2Tensors locate(const spec::ModelSpec& model, W* base,
                            const std::vector<NamedTensor>& tensors, int layer);
};

// The unit's saved tensors (N = B*s rows, C hidden, F ffn_hidden, e = segment end):
//   from F to the end of B:  q (N,C), lse (B,H,s), fc_pre (N,F); kv (N,2C) in kv_cache
//   from F to W:             x_in, ln1, atty, x_mid, ln2 (N,C each), mean1/rstd1/mean2/rstd2
//                            (N each), fc_gelu (N,F)
//   from B to W:             dx_out, d_ln2, dx_mid, dq, d_ln1 (N,C each), d_fc_pre (N,F)
struct Gpt2State : LayerState {
  PooledBuffer q, lse, fc_pre;
  PooledBuffer ln1, mean1, rstd1, atty, x_mid, ln2, mean2, rstd2, fc_gelu;
  PooledBuffer d_fc_pre, d_ln2, dx_mid, dq, d_ln1;
  void buffers(std::vector<PooledBuffer*>& out) override {
    LayerState::buffers(out);
    for (PooledBuffer* b : {&q, &lse, &fc_pre, &ln1, &mean1, &rstd1, &atty, &x_mid, &ln2, &mean2, &rstd2, &fc_gelu,
                            &d_fc_pre, &d_ln2, &dx_mid, &dq, &d_ln1}) {
      out.push_back(b);
    }
  }
};

template <typename T>
class Gpt2Block : public Block {
 public:
  Gpt2Block(const spec::ModelSpec& model, Gpt2Tensors<T> params, Gpt2Tensors<float> grads,
            kernels::Backend& backend, TensorParallelGroup* tp = nullptr)
      : model_(model), p_(params), g_(grads), backend_(backend), tp_(tp, backend),
        w_(LocalWidths::of(model, tp_.size())) {}

  std::unique_ptr<LayerState> make_state() const override { return std::make_unique<Gpt2State>(); }
  void forward(LayerState& st, std::span<const KVRef> prefix, int batch, const spec::Segment& seg,
               TypedPtr out, TensorPool& pool) const override;
  void recompute(LayerState& st, std::span<const KVRef> prefix, int batch,
                 const spec::Segment& seg, TensorPool& pool) const override;
  void backward_input(LayerState& st, std::span<const KVRef> blocks, int batch,
                      const spec::Segment& seg, TypedPtr dx_in, TensorPool& pool) const override;
  void backward_weight(LayerState& st, int batch, const spec::Segment& seg,
                       TensorPool& pool) const override;

 private:
  // F up to fc_gelu (everything but the output projection); with_kv: also the K/V projection
  // into st.kv (F), else st.kv holds it already (recomputation).
  void saved_forward(Gpt2State& st, std::span<const KVRef> prefix, int batch,
                     const spec::Segment& seg, TensorPool& pool, bool with_kv) const;

  const spec::ModelSpec& model_;
  Gpt2Tensors<T> p_;
  Gpt2Tensors<float> g_;
  kernels::Backend& backend_;  // where the tensors live and the kernels run
  TensorParallelOps<T> tp_;
  LocalWidths w_;
};

}  // namespace plait::model
