#include "plait/model/gpt2_block.h"

#include "plait/core/memory_category.h"
#include "plait/spec/unit_memory.h"

namespace plait::model {


Gpt2Tensors Gpt2Tensors::locate(const spec::ModelSpec& model, float* base,
                                const std::vector<NamedTensor>& tensors, int layer) {
  auto at = [&](const char* suffix) {
    return base + find_tensor(tensors, layer_tensor_name(model, layer, suffix)).offset;
  };
  return {at("ln_1.weight"),        at("ln_1.bias"),        at("attn.c_attn.weight"),
          at("attn.c_attn.bias"),   at("attn.c_proj.weight"), at("attn.c_proj.bias"),
          at("ln_2.weight"),        at("ln_2.bias"),        at("mlp.c_fc.weight"),
          at("mlp.c_fc.bias"),      at("mlp.c_proj.weight"), at("mlp.c_proj.bias")};
}

void Gpt2Block::saved_forward(Gpt2State& st, std::span<const kernels::KVBlock<float>> prefix,
                              int batch, const spec::Segment& seg, TensorPool& pool,
                              bool with_kv) const {
  constexpr auto kAct = MemoryCategory::kActivations;
  const int c = model_.hidden, h = model_.heads, f = model_.ffn_hidden;
  const int s = seg.length;
  const int n = batch * s;
  const std::size_t nc = static_cast<std::size_t>(n) * c;

  // Attention half.
  st.ln1 = pool.acquire(kAct, nc);
  st.mean1 = pool.acquire(kAct, n);
  st.rstd1 = pool.acquire(kAct, n);
  backend_.layernorm_forward(st.ln1.data(), st.mean1.data(), st.rstd1.data(), st.x_in.data(), p_.ln1_w,
                    p_.ln1_b, n, c, model_.norm_eps);
  st.q = pool.acquire(kAct, nc);
  backend_.matmul_forward(st.q.data(), st.ln1.data(), p_.attn_w, p_.attn_b, nullptr, n, c, c);
  if (with_kv) {
    st.kv = pool.acquire(MemoryCategory::kKVCache, 2 * nc);
    backend_.matmul_forward(st.kv.data(), st.ln1.data(), p_.attn_w + static_cast<std::size_t>(c) * c,
                          p_.attn_b + c, nullptr, n, c, 2 * c);
  }
  std::vector<kernels::KVBlock<float>> blocks(prefix.begin(), prefix.end());
  blocks.push_back({st.kv.data(), nullptr, s});
  st.lse = pool.acquire(kAct, static_cast<std::size_t>(batch) * h * s);
  st.atty = pool.acquire(kAct, nc);
  // GPT-2 is multi-head attention: every query head has its own K/V head (kv_heads = heads).
  backend_.attention_forward(st.atty.data(), st.lse.data(), st.q.data(), blocks, batch, s, c, h, h);
  st.x_mid = pool.acquire(kAct, nc);
  backend_.matmul_forward(st.x_mid.data(), st.atty.data(), p_.proj_w, p_.proj_b, st.x_in.data(), n,
                        c, c);

  // MLP half, up to the output projection.
  st.ln2 = pool.acquire(kAct, nc);
  st.mean2 = pool.acquire(kAct, n);
  st.rstd2 = pool.acquire(kAct, n);
  backend_.layernorm_forward(st.ln2.data(), st.mean2.data(), st.rstd2.data(), st.x_mid.data(), p_.ln2_w,
                    p_.ln2_b, n, c, model_.norm_eps);
  const std::size_t nf = static_cast<std::size_t>(n) * f;
  st.fc_pre = pool.acquire(kAct, nf);
  backend_.matmul_forward(st.fc_pre.data(), st.ln2.data(), p_.fc_w, p_.fc_b, nullptr, n, c, f);
  st.fc_gelu = pool.acquire(kAct, nf);
  backend_.gelu_forward(st.fc_gelu.data(), st.fc_pre.data(), nf);
}

void Gpt2Block::forward(LayerState& state, std::span<const kernels::KVBlock<float>> prefix,
                        int batch, const spec::Segment& seg, float* out, TensorPool& pool) const {
  auto& st = static_cast<Gpt2State&>(state);
  saved_forward(st, prefix, batch, seg, pool, true);
  backend_.matmul_forward(out, st.fc_gelu.data(), p_.fcproj_w, p_.fcproj_b, st.x_mid.data(),
                        batch * seg.length, model_.ffn_hidden, model_.hidden);
}

void Gpt2Block::recompute(LayerState& state, std::span<const kernels::KVBlock<float>> prefix,
                          int batch, const spec::Segment& seg, TensorPool& pool) const {
  saved_forward(static_cast<Gpt2State&>(state), prefix, batch, seg, pool, false);
}

void Gpt2Block::backward_input(LayerState& state, std::span<const kernels::KVBlock<float>> blocks,
                               int batch, const spec::Segment& seg, float* dx_in,
                               TensorPool& pool) const {
  constexpr auto kAct = MemoryCategory::kActivations;
  auto& st = static_cast<Gpt2State&>(state);
  const int c = model_.hidden, h = model_.heads, f = model_.ffn_hidden;
  const int s = seg.length;
  const int n = batch * s;
  const std::size_t nc = static_cast<std::size_t>(n) * c;
  int e = 0;
  for (const auto& blk : blocks) e += blk.length;

  // Everything B produces is allocated up front and B's inputs are freed at the end, so the
  // peak inside B has a simple formula (docs/engine.md).
  const std::size_t nf = static_cast<std::size_t>(n) * f;
  st.d_fc_pre = pool.acquire(kAct, nf);
  st.d_ln2 = pool.acquire(kAct, nc);
  st.dx_mid = pool.acquire(kAct, nc);
  st.dq = pool.acquire(kAct, nc);
  st.d_ln1 = pool.acquire(kAct, nc);
  PooledBuffer d_atty = pool.acquire(kAct, nc);
  PooledBuffer workspace =
      pool.acquire(kAct, backend_.attention_backward_workspace(batch, s, e, h, c / h));

  // MLP half, top down.
  backend_.matmul_backward_input(st.d_fc_pre.data(), st.dx_out.data(), p_.fcproj_w, n, f, c, false);
  backend_.gelu_backward(st.d_fc_pre.data(), st.fc_pre.data(), st.d_fc_pre.data(), nf);
  backend_.matmul_backward_input(st.d_ln2.data(), st.d_fc_pre.data(), p_.fc_w, n, c, f, false);
  backend_.layernorm_backward_input(st.dx_mid.data(), st.dx_out.data(), st.d_ln2.data(), st.x_mid.data(),
                           p_.ln2_w, st.mean2.data(), st.rstd2.data(), n, c);
  // Attention half.
  backend_.matmul_backward_input(d_atty.data(), st.dx_mid.data(), p_.proj_w, n, c, c, false);
  backend_.attention_backward(st.dq.data(), blocks, d_atty.data(), st.q.data(), st.atty.data(),
                              st.lse.data(),
                            batch, s, c, h, h, workspace.data());
  backend_.matmul_backward_input(st.d_ln1.data(), st.dq.data(), p_.attn_w, n, c, c, false);
  backend_.matmul_backward_input(st.d_ln1.data(), st.dkv.data(), p_.attn_w + static_cast<std::size_t>(c) * c,
                        n, c, 2 * c, true);
  backend_.layernorm_backward_input(dx_in, st.dx_mid.data(), st.d_ln1.data(), st.x_in.data(), p_.ln1_w,
                           st.mean1.data(), st.rstd1.data(), n, c);

  st.fc_pre.reset();
  st.q.reset();
  st.lse.reset();
  st.kv.reset();  // later segments' backwards, the last users of this K/V, ran before this one
}

void Gpt2Block::backward_weight(LayerState& state, int batch, const spec::Segment& seg) const {
  auto& st = static_cast<Gpt2State&>(state);
  const int c = model_.hidden, f = model_.ffn_hidden;
  const int n = batch * seg.length;
  backend_.matmul_backward_weight(g_.fcproj_w, g_.fcproj_b, st.dx_out.data(), st.fc_gelu.data(), n, f, c);
  backend_.matmul_backward_weight(g_.fc_w, g_.fc_b, st.d_fc_pre.data(), st.ln2.data(), n, c, f);
  backend_.layernorm_backward_weight(g_.ln2_w, g_.ln2_b, st.d_ln2.data(), st.x_mid.data(), st.mean2.data(),
                            st.rstd2.data(), n, c);
  backend_.matmul_backward_weight(g_.proj_w, g_.proj_b, st.dx_mid.data(), st.atty.data(), n, c, c);
  backend_.matmul_backward_weight(g_.attn_w, g_.attn_b, st.dq.data(), st.ln1.data(), n, c, c);
  backend_.matmul_backward_weight(g_.attn_w + static_cast<std::size_t>(c) * c, g_.attn_b + c,
                         st.dkv.data(), st.ln1.data(), n, c, 2 * c);
  backend_.layernorm_backward_weight(g_.ln1_w, g_.ln1_b, st.d_ln1.data(), st.x_in.data(), st.mean1.data(),
                            st.rstd1.data(), n, c);
  st = Gpt2State{};
}

}  // namespace plait::model
