#pragma once
// One LLaMA block (Touvron et al., arXiv 2302.13971; Hugging Face LlamaDecoderLayer), pre-norm:
//   x_mid = x + o_proj(attn(rope(q_proj(n1)), rope(k_proj(n1)), v_proj(n1))),  n1 = rms_1(x)
//   out   = x_mid + down_proj(silu(gate_proj(n2)) * up_proj(n2)),              n2 = rms_2(x_mid)
// RMSNorm (Zhang & Sennrich 2019), rotary positions on q and k at absolute positions
// segment.start + t (Su et al. 2021, Hugging Face's rotate-half pairing), grouped-query attention
// (kv_heads K/V heads shared by heads / kv_heads query heads each), SwiGLU MLP (Shazeer 2020),
// no biases.
//
// Seq1F1B segments: the K/V cache holds ROTATED keys, so a later segment's queries (rotated at
// their own positions) attend to earlier keys exactly as in the whole sequence. The attention
// backward leaves dL/d(rotated q) and dL/d(rotated k); the block rotates them back (the inverse,
// orthogonal map) once complete — dq after its own attention backward, this unit's dK after
// the later segments' backwards and its own have all added into it — before the q/k
// projections' backward.
#include "plait/model/block.h"

namespace plait::model {

// Pointers to one layer's tensors. k_proj and v_proj are back to back ((2K, C): K rows then V
// rows), as are gate_proj and up_proj ((2F, C)), so each pair is one GEMM (parameter_layout.h).
template <typename W>
struct LlamaTensors {
  W* norm1_w;
  W* q_w;
  W* kv_w;
  W* o_w;
  W* norm2_w;
  W* gate_up_w;
  W* down_w;

  static LlamaTensors locate(const spec::ModelSpec& model, W* base,
                             const std::vector<NamedTensor>& tensors, int layer);
};

// The unit's saved tensors (N = B*s rows, C hidden, K = kv_dim, F ffn_hidden, e = segment end):
//   from F to the end of B:  q (N,C) rotated, lse (B,H,s), gate_up (N,2F); kv (N,2K)
//                            rotated K | V in kv_cache
//   from F to W:             x_in, n1, atty, x_mid, n2 (N,C each), rstd1/rstd2 (N each),
//                            h = swiglu(gate_up) (N,F)
//   from B to W:             dx_out, d_n2, dx_mid, dq, d_n1 (N,C each), d_gate_up (N,2F)
struct LlamaState : LayerState {
  PooledBuffer q, lse, gate_up;
  PooledBuffer n1, rstd1, atty, x_mid, n2, rstd2, h;
  PooledBuffer d_gate_up, d_n2, dx_mid, dq, d_n1;
  void buffers(std::vector<PooledBuffer*>& out) override {
    LayerState::buffers(out);
    for (PooledBuffer* b : {&q, &lse, &gate_up, &n1, &rstd1, &atty, &x_mid, &n2, &rstd2, &h, &d_gate_up, &d_n2,
                            &dx_mid, &dq, &d_n1}) {
      out.push_back(b);
    }
  }
};

// T: the activation type (float, or bf16 under mixed precision: spec/precision_policy.h).
template <typename T>
class LlamaBlock : public Block {
 public:
  LlamaBlock(const spec::ModelSpec& model, LlamaTensors<T> params, LlamaTensors<float> grads,
            kernels::Backend& backend, TensorParallelGroup* tp = nullptr)
      : model_(model), p_(params), g_(grads), backend_(backend), tp_(tp, backend),
        w_(LocalWidths::of(model, tp_.size())) {}

  std::unique_ptr<LayerState> make_state() const override { return std::make_unique<LlamaState>(); }
  void forward(LayerState& st, std::span<const KVRef> prefix, int batch,
               const spec::Segment& seg, TypedPtr out, TensorPool& pool) const override;
  void recompute(LayerState& st, std::span<const KVRef> prefix, int batch,
                 const spec::Segment& seg, TensorPool& pool) const override;
  void backward_input(LayerState& st, std::span<const KVRef> blocks, int batch,
                      const spec::Segment& seg, TypedPtr dx_in, TensorPool& pool) const override;
  void backward_weight(LayerState& st, int batch, const spec::Segment& seg,
                       TensorPool& pool) const override;

 private:
  // F up to h (everything but the down projection); with_kv: also the K/V projection and its
  // rotation into st.kv (F), else st.kv holds the rotated K/V already (recomputation).
  void saved_forward(LlamaState& st, std::span<const KVRef> prefix, int batch,
                     const spec::Segment& seg, TensorPool& pool, bool with_kv) const;

  const spec::ModelSpec& model_;
  LlamaTensors<T> p_;
  LlamaTensors<float> g_;
  kernels::Backend& backend_;  // where the tensors live and the kernels run
  TensorParallelOps<T> tp_;
  LocalWidths w_;
};

}  // namespace plait::model
