#include "plait/model/llama_block.h"

#include "plait/core/memory_category.h"
#include "plait/spec/unit_memory.h"

namespace plait::model {


LlamaTensors LlamaTensors::locate(const spec::ModelSpec& model, float* base,
                                  const std::vector<NamedTensor>& tensors, int layer) {
  auto at = [&](const char* suffix) {
    return base + find_tensor(tensors, layer_tensor_name(model, layer, suffix)).offset;
  };
  return {at("input_layernorm.weight"),          at("self_attn.q_proj.weight"),
          at("self_attn.k_proj.weight"),         at("self_attn.o_proj.weight"),
          at("post_attention_layernorm.weight"), at("mlp.gate_proj.weight"),
          at("mlp.down_proj.weight")};
}

void LlamaBlock::saved_forward(LlamaState& st, std::span<const kernels::KVBlock<float>> prefix,
                               int batch, const spec::Segment& seg, TensorPool& pool,
                               bool with_kv) const {
  constexpr auto kAct = MemoryCategory::kActivations;
  const int c = model_.hidden, h = model_.heads, kvh = model_.kv_heads, d = model_.head_dim();
  const int k = model_.kv_dim(), f = model_.ffn_hidden;
  const int s = seg.length, n = batch * s;
  const std::size_t nc = static_cast<std::size_t>(n) * c, nf = static_cast<std::size_t>(n) * f;

  // Attention half.
  st.n1 = pool.acquire(kAct, nc);
  st.rstd1 = pool.acquire(kAct, n);
  backend_.rmsnorm_forward(st.n1.data(), st.rstd1.data(), st.x_in.data(), p_.norm1_w, n, c, model_.norm_eps);
  st.q = pool.acquire(kAct, nc);
  backend_.matmul_forward(st.q.data(), st.n1.data(), p_.q_w, nullptr, nullptr, n, c, c);
  if (with_kv) {
    st.kv = pool.acquire(MemoryCategory::kKVCache, static_cast<std::size_t>(n) * 2 * k);
    backend_.matmul_forward(st.kv.data(), st.n1.data(), p_.kv_w, nullptr, nullptr, n, c, 2 * k);
    backend_.rotary_forward(st.kv.data(), batch, s, kvh, d, 2 * k, seg.start, model_.rope_theta);
  }
  backend_.rotary_forward(st.q.data(), batch, s, h, d, c, seg.start, model_.rope_theta);
  std::vector<kernels::KVBlock<float>> blocks(prefix.begin(), prefix.end());
  blocks.push_back({st.kv.data(), nullptr, s});
  st.lse = pool.acquire(kAct, static_cast<std::size_t>(batch) * h * s);
  st.atty = pool.acquire(kAct, nc);
  backend_.attention_forward(st.atty.data(), st.lse.data(), st.q.data(), blocks, batch, s, c, h, kvh);
  st.x_mid = pool.acquire(kAct, nc);
  backend_.matmul_forward(st.x_mid.data(), st.atty.data(), p_.o_w, nullptr, st.x_in.data(), n, c, c);

  // MLP half, up to the down projection.
  st.n2 = pool.acquire(kAct, nc);
  st.rstd2 = pool.acquire(kAct, n);
  backend_.rmsnorm_forward(st.n2.data(), st.rstd2.data(), st.x_mid.data(), p_.norm2_w, n, c, model_.norm_eps);
  st.gate_up = pool.acquire(kAct, 2 * nf);
  backend_.matmul_forward(st.gate_up.data(), st.n2.data(), p_.gate_up_w, nullptr, nullptr, n, c, 2 * f);
  st.h = pool.acquire(kAct, nf);
  backend_.swiglu_forward(st.h.data(), st.gate_up.data(), n, f);
}

void LlamaBlock::forward(LayerState& state, std::span<const kernels::KVBlock<float>> prefix,
                         int batch, const spec::Segment& seg, float* out, TensorPool& pool) const {
  auto& st = static_cast<LlamaState&>(state);
  saved_forward(st, prefix, batch, seg, pool, true);
  backend_.matmul_forward(out, st.h.data(), p_.down_w, nullptr, st.x_mid.data(), batch * seg.length,
                        model_.ffn_hidden, model_.hidden);
}

void LlamaBlock::recompute(LayerState& state, std::span<const kernels::KVBlock<float>> prefix,
                           int batch, const spec::Segment& seg, TensorPool& pool) const {
  saved_forward(static_cast<LlamaState&>(state), prefix, batch, seg, pool, false);
}

void LlamaBlock::backward_input(LayerState& state, std::span<const kernels::KVBlock<float>> blocks,
                                int batch, const spec::Segment& seg, float* dx_in,
                                TensorPool& pool) const {
  constexpr auto kAct = MemoryCategory::kActivations;
  auto& st = static_cast<LlamaState&>(state);
  const int c = model_.hidden, h = model_.heads, kvh = model_.kv_heads, d = model_.head_dim();
  const int k = model_.kv_dim(), f = model_.ffn_hidden;
  const int s = seg.length, n = batch * s;
  const std::size_t nc = static_cast<std::size_t>(n) * c, nf = static_cast<std::size_t>(n) * f;
  int e = 0;
  for (const auto& blk : blocks) e += blk.length;

  // Everything B produces is allocated up front and B's inputs are freed at the end, so the
  // peak inside B has a simple formula (spec/unit_memory.cpp walks it).
  st.d_gate_up = pool.acquire(kAct, 2 * nf);
  st.d_n2 = pool.acquire(kAct, nc);
  st.dx_mid = pool.acquire(kAct, nc);
  st.dq = pool.acquire(kAct, nc);
  st.d_n1 = pool.acquire(kAct, nc);
  PooledBuffer d_atty = pool.acquire(kAct, nc);
  PooledBuffer d_h = pool.acquire(kAct, nf);
  PooledBuffer workspace =
      pool.acquire(kAct, backend_.attention_backward_workspace(batch, s, e, h, c / h));

  // MLP half, top down.
  backend_.matmul_backward_input(d_h.data(), st.dx_out.data(), p_.down_w, n, f, c, false);
  backend_.swiglu_backward(st.d_gate_up.data(), d_h.data(), st.gate_up.data(), n, f);
  backend_.matmul_backward_input(st.d_n2.data(), st.d_gate_up.data(), p_.gate_up_w, n, c, 2 * f, false);
  backend_.rmsnorm_backward_input(st.dx_mid.data(), st.dx_out.data(), st.d_n2.data(), st.x_mid.data(),
                         p_.norm2_w, st.rstd2.data(), n, c);
  // Attention half: gradients w.r.t. the rotated q and k, rotated back once complete.
  backend_.matmul_backward_input(d_atty.data(), st.dx_mid.data(), p_.o_w, n, c, c, false);
  backend_.attention_backward(st.dq.data(), blocks, d_atty.data(), st.q.data(), st.atty.data(),
                              st.lse.data(),
                            batch, s, c, h, kvh, workspace.data());
  backend_.rotary_backward(st.dq.data(), batch, s, h, d, c, seg.start, model_.rope_theta);
  backend_.rotary_backward(st.dkv.data(), batch, s, kvh, d, 2 * k, seg.start, model_.rope_theta);
  backend_.matmul_backward_input(st.d_n1.data(), st.dq.data(), p_.q_w, n, c, c, false);
  backend_.matmul_backward_input(st.d_n1.data(), st.dkv.data(), p_.kv_w, n, c, 2 * k, true);
  backend_.rmsnorm_backward_input(dx_in, st.dx_mid.data(), st.d_n1.data(), st.x_in.data(), p_.norm1_w,
                         st.rstd1.data(), n, c);

  st.gate_up.reset();
  st.q.reset();
  st.lse.reset();
  st.kv.reset();  // later segments' backwards, the last users of this K/V, ran before this one
}

void LlamaBlock::backward_weight(LayerState& state, int batch, const spec::Segment& seg) const {
  auto& st = static_cast<LlamaState&>(state);
  const int c = model_.hidden, k = model_.kv_dim(), f = model_.ffn_hidden;
  const int n = batch * seg.length;
  backend_.matmul_backward_weight(g_.down_w, nullptr, st.dx_out.data(), st.h.data(), n, f, c);
  backend_.matmul_backward_weight(g_.gate_up_w, nullptr, st.d_gate_up.data(), st.n2.data(), n, c, 2 * f);
  backend_.rmsnorm_backward_weight(g_.norm2_w, st.d_n2.data(), st.x_mid.data(), st.rstd2.data(), n, c);
  backend_.matmul_backward_weight(g_.o_w, nullptr, st.dx_mid.data(), st.atty.data(), n, c, c);
  backend_.matmul_backward_weight(g_.q_w, nullptr, st.dq.data(), st.n1.data(), n, c, c);
  backend_.matmul_backward_weight(g_.kv_w, nullptr, st.dkv.data(), st.n1.data(), n, c, 2 * k);
  backend_.rmsnorm_backward_weight(g_.norm1_w, st.d_n1.data(), st.x_in.data(), st.rstd1.data(), n, c);
  st = LlamaState{};
}

}  // namespace plait::model
