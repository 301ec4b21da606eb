#include "plait/model/gpt2_block.h"

#include "plait/core/memory_category.h"
#include "plait/model/layer_precision.h"
#include "plait/spec/unit_memory.h"

namespace plait::model {

template <typename W>
Gpt2Tensors<W> Gpt2Tensors<W>::locate(const spec::ModelSpec& model, W* base,
                                      const std::vector<NamedTensor>& tensors, int layer) {
  auto at = [&](const char* suffix) {
    return base + find_tensor(tensors, layer_tensor_name(model, layer, suffix)).offset;
  };
  return {at("ln_1.weight"),        at("ln_1.bias"),        at("attn.c_attn.weight"),
          at("attn.c_attn.bias"),   at("attn.c_proj.weight"), at("attn.c_proj.bias"),
          at("ln_2.weight"),        at("ln_2.bias"),        at("mlp.c_fc.weight"),
          at("mlp.c_fc.bias"),      at("mlp.c_proj.weight"), at("mlp.c_proj.bias")};
}

template <typename T>
void Gpt2Block<T>::saved_forward(Gpt2State& st, std::span<const KVRef> prefix, int batch,
                                 const spec::Segment& seg, TensorPool& pool, bool with_kv) const {
  constexpr auto kAct = MemoryCategory::kActivations;
  const int c = model_.hidden, h = model_.heads, f = model_.ffn_hidden;
  const int s = seg.length;
  const int n = batch * s;
  const std::size_t nc = static_cast<std::size_t>(n) * c;
  auto act = [&](std::size_t count) { return pool.acquire_as<T>(kAct, count); };
  auto stat = [&](std::size_t count) { return pool.acquire(kAct, count); };

  // Attention half.
  st.ln1 = act(nc);
  st.mean1 = stat(n);
  st.rstd1 = stat(n);
  backend_.layernorm_forward(st.ln1.template as<T>(), st.mean1.data(), st.rstd1.data(),
                             st.x_in.template as<T>(), p_.ln1_w, p_.ln1_b, n, c, model_.norm_eps);
  st.q = act(nc);
  backend_.matmul_forward(st.q.template as<T>(), st.ln1.template as<T>(), p_.attn_w, p_.attn_b,
                          nullptr, n, c, c);
  if (with_kv) {
    st.kv = pool.acquire_as<T>(MemoryCategory::kKVCache, 2 * nc);
    backend_.matmul_forward(st.kv.template as<T>(), st.ln1.template as<T>(),
                            p_.attn_w + static_cast<std::size_t>(c) * c, p_.attn_b + c, nullptr,
                            n, c, 2 * c);
  }
  std::vector<kernels::KVBlock<T>> blocks = typed_blocks<T>(prefix);
  blocks.push_back({st.kv.template as<T>(), nullptr, s});
  st.lse = stat(static_cast<std::size_t>(batch) * h * s);
  st.atty = act(nc);
  // GPT-2 is multi-head attention: every query head has its own K/V head (kv_heads = heads).
  backend_.attention_forward(st.atty.template as<T>(), st.lse.data(), st.q.template as<T>(),
                             std::span<const kernels::KVBlock<T>>(blocks), batch, s, c, h, h);
  st.x_mid = act(nc);
  backend_.matmul_forward(st.x_mid.template as<T>(), st.atty.template as<T>(), p_.proj_w,
                          p_.proj_b, st.x_in.template as<T>(), n, c, c);

  // MLP half, up to the output projection.
  st.ln2 = act(nc);
  st.mean2 = stat(n);
  st.rstd2 = stat(n);
  backend_.layernorm_forward(st.ln2.template as<T>(), st.mean2.data(), st.rstd2.data(),
                             st.x_mid.template as<T>(), p_.ln2_w, p_.ln2_b, n, c, model_.norm_eps);
  const std::size_t nf = static_cast<std::size_t>(n) * f;
  st.fc_pre = act(nf);
  backend_.matmul_forward(st.fc_pre.template as<T>(), st.ln2.template as<T>(), p_.fc_w, p_.fc_b,
                          nullptr, n, c, f);
  st.fc_gelu = act(nf);
  backend_.gelu_forward(st.fc_gelu.template as<T>(), st.fc_pre.template as<T>(), nf);
}

template <typename T>
void Gpt2Block<T>::forward(LayerState& state, std::span<const KVRef> prefix, int batch,
                           const spec::Segment& seg, TypedPtr out, TensorPool& pool) const {
  auto& st = static_cast<Gpt2State&>(state);
  saved_forward(st, prefix, batch, seg, pool, true);
  backend_.matmul_forward(out.as<T>(), st.fc_gelu.template as<T>(), p_.fcproj_w, p_.fcproj_b,
                          st.x_mid.template as<T>(), batch * seg.length, model_.ffn_hidden,
                          model_.hidden);
}

template <typename T>
void Gpt2Block<T>::recompute(LayerState& state, std::span<const KVRef> prefix, int batch,
                             const spec::Segment& seg, TensorPool& pool) const {
  saved_forward(static_cast<Gpt2State&>(state), prefix, batch, seg, pool, false);
}

template <typename T>
void Gpt2Block<T>::backward_input(LayerState& state, std::span<const KVRef> kv, int batch,
                                  const spec::Segment& seg, TypedPtr dx_in,
                                  TensorPool& pool) const {
  constexpr auto kAct = MemoryCategory::kActivations;
  auto& st = static_cast<Gpt2State&>(state);
  const int c = model_.hidden, h = model_.heads, f = model_.ffn_hidden;
  const int s = seg.length;
  const int n = batch * s;
  const std::size_t nc = static_cast<std::size_t>(n) * c;
  int e = 0;
  for (const auto& blk : kv) e += blk.length;
  auto act = [&](std::size_t count) { return pool.acquire_as<T>(kAct, count); };

  // Everything B produces is allocated up front and B's inputs are freed at the end, so the
  // peak inside B has a simple formula (docs/engine.md).
  const std::size_t nf = static_cast<std::size_t>(n) * f;
  st.d_fc_pre = act(nf);
  st.d_ln2 = act(nc);
  st.dx_mid = act(nc);
  st.dq = act(nc);
  st.d_ln1 = act(nc);
  PooledBuffer d_atty = act(nc);
  PooledBuffer workspace =
      pool.acquire(kAct, backend_.attention_backward_workspace(batch, s, e, h, c / h));

  T* const dx_out = st.dx_out.template as<T>();
  // MLP half, top down.
  backend_.matmul_backward_input(st.d_fc_pre.template as<T>(), dx_out, p_.fcproj_w, n, f, c,
                                 false);
  backend_.gelu_backward(st.d_fc_pre.template as<T>(), st.fc_pre.template as<T>(),
                         st.d_fc_pre.template as<T>(), nf);
  backend_.matmul_backward_input(st.d_ln2.template as<T>(), st.d_fc_pre.template as<T>(), p_.fc_w,
                                 n, c, f, false);
  backend_.layernorm_backward_input(st.dx_mid.template as<T>(), dx_out, st.d_ln2.template as<T>(),
                                    st.x_mid.template as<T>(), p_.ln2_w, st.mean2.data(),
                                    st.rstd2.data(), n, c);
  // Attention half.
  backend_.matmul_backward_input(d_atty.template as<T>(), st.dx_mid.template as<T>(), p_.proj_w,
                                 n, c, c, false);
  const std::vector<kernels::KVBlock<T>> blocks = typed_blocks<T>(kv);
  backend_.attention_backward(st.dq.template as<T>(), std::span<const kernels::KVBlock<T>>(blocks),
                              d_atty.template as<T>(), st.q.template as<T>(),
                              st.atty.template as<T>(), st.lse.data(), batch, s, c, h, h,
                              workspace.data());
  const T* dkv = complete_dkv<T>(st, pool, backend_);
  backend_.matmul_backward_input(st.d_ln1.template as<T>(), st.dq.template as<T>(), p_.attn_w, n,
                                 c, c, false);
  backend_.matmul_backward_input(st.d_ln1.template as<T>(), dkv,
                                 p_.attn_w + static_cast<std::size_t>(c) * c, n, c, 2 * c, true);
  backend_.layernorm_backward_input(dx_in.as<T>(), st.dx_mid.template as<T>(),
                                    st.d_ln1.template as<T>(), st.x_in.template as<T>(), p_.ln1_w,
                                    st.mean1.data(), st.rstd1.data(), n, c);

  st.fc_pre.reset();
  st.q.reset();
  st.lse.reset();
  st.kv.reset();  // later segments' backwards, the last users of this K/V, ran before this one
}

template <typename T>
void Gpt2Block<T>::backward_weight(LayerState& state, int batch, const spec::Segment& seg) const {
  auto& st = static_cast<Gpt2State&>(state);
  const int c = model_.hidden, f = model_.ffn_hidden;
  const int n = batch * seg.length;
  backend_.matmul_backward_weight(g_.fcproj_w, g_.fcproj_b, st.dx_out.template as<T>(),
                                  st.fc_gelu.template as<T>(), n, f, c);
  backend_.matmul_backward_weight(g_.fc_w, g_.fc_b, st.d_fc_pre.template as<T>(),
                                  st.ln2.template as<T>(), n, c, f);
  backend_.layernorm_backward_weight(g_.ln2_w, g_.ln2_b, st.d_ln2.template as<T>(),
                                     st.x_mid.template as<T>(), st.mean2.data(), st.rstd2.data(),
                                     n, c);
  backend_.matmul_backward_weight(g_.proj_w, g_.proj_b, st.dx_mid.template as<T>(),
                                  st.atty.template as<T>(), n, c, c);
  backend_.matmul_backward_weight(g_.attn_w, g_.attn_b, st.dq.template as<T>(),
                                  st.ln1.template as<T>(), n, c, c);
  backend_.matmul_backward_weight(g_.attn_w + static_cast<std::size_t>(c) * c, g_.attn_b + c,
                                  completed_dkv<T>(st), st.ln1.template as<T>(), n, c, 2 * c);
  backend_.layernorm_backward_weight(g_.ln1_w, g_.ln1_b, st.d_ln1.template as<T>(),
                                     st.x_in.template as<T>(), st.mean1.data(), st.rstd1.data(),
                                     n, c);
  st = Gpt2State{};
}

template struct Gpt2Tensors<float>;
template struct Gpt2Tensors<bf16>;
template class Gpt2Block<float>;
template class Gpt2Block<bf16>;

}  // namespace plait::model
