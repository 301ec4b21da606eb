#include "plait/model/llama_block.h"

#include "plait/core/memory_category.h"
#include "plait/model/layer_precision.h"
#include "plait/spec/unit_memory.h"

namespace plait::model {

template <typename W>
LlamaTensors<W> LlamaTensors<W>::locate(const spec::ModelSpec& model, W* base,
                                        const std::vector<NamedTensor>& tensors, int layer) {
  auto at = [&](const char* suffix) {
    return base + find_tensor(tensors, layer_tensor_name(model, layer, suffix)).offset;
  };
  return {at("input_layernorm.weight"),          at("self_attn.q_proj.weight"),
          at("self_attn.k_proj.weight"),         at("self_attn.o_proj.weight"),
          at("post_attention_layernorm.weight"), at("mlp.gate_proj.weight"),
          at("mlp.down_proj.weight")};
}

template <typename T>
void LlamaBlock<T>::saved_forward(LlamaState& st, std::span<const KVRef> prefix, int batch,
                                  const spec::Segment& seg, TensorPool& pool,
                                  bool with_kv) const {
  constexpr auto kAct = MemoryCategory::kActivations;
  const int c = model_.hidden, h = model_.heads, kvh = model_.kv_heads, d = model_.head_dim();
  const int k = model_.kv_dim(), f = model_.ffn_hidden;
  const int s = seg.length, n = batch * s;
  const std::size_t nc = static_cast<std::size_t>(n) * c, nf = static_cast<std::size_t>(n) * f;
  auto act = [&](std::size_t count) { return pool.acquire_as<T>(kAct, count); };
  auto stat = [&](std::size_t count) { return pool.acquire(kAct, count); };

  // Attention half.
  st.n1 = act(nc);
  st.rstd1 = stat(n);
  backend_.rmsnorm_forward(st.n1.template as<T>(), st.rstd1.data(), st.x_in.template as<T>(),
                           p_.norm1_w, n, c, model_.norm_eps);
  st.q = act(nc);
  backend_.matmul_forward(st.q.template as<T>(), st.n1.template as<T>(), p_.q_w, nullptr, nullptr,
                          n, c, c);
  if (with_kv) {
    st.kv = pool.acquire_as<T>(MemoryCategory::kKVCache, static_cast<std::size_t>(n) * 2 * k);
    backend_.matmul_forward(st.kv.template as<T>(), st.n1.template as<T>(), p_.kv_w, nullptr,
                            nullptr, n, c, 2 * k);
    backend_.rotary_forward(st.kv.template as<T>(), batch, s, kvh, d, 2 * k, seg.start,
                            model_.rope_theta);
  }
  backend_.rotary_forward(st.q.template as<T>(), batch, s, h, d, c, seg.start, model_.rope_theta);
  std::vector<kernels::KVBlock<T>> blocks = typed_blocks<T>(prefix);
  blocks.push_back({st.kv.template as<T>(), nullptr, s});
  st.lse = stat(static_cast<std::size_t>(batch) * h * s);
  st.atty = act(nc);
  backend_.attention_forward(st.atty.template as<T>(), st.lse.data(), st.q.template as<T>(),
                             std::span<const kernels::KVBlock<T>>(blocks), batch, s, c, h, kvh);
  st.x_mid = act(nc);
  backend_.matmul_forward(st.x_mid.template as<T>(), st.atty.template as<T>(), p_.o_w, nullptr,
                          st.x_in.template as<T>(), n, c, c);

  // MLP half, up to the down projection.
  st.n2 = act(nc);
  st.rstd2 = stat(n);
  backend_.rmsnorm_forward(st.n2.template as<T>(), st.rstd2.data(), st.x_mid.template as<T>(),
                           p_.norm2_w, n, c, model_.norm_eps);
  st.gate_up = act(2 * nf);
  backend_.matmul_forward(st.gate_up.template as<T>(), st.n2.template as<T>(), p_.gate_up_w,
                          nullptr, nullptr, n, c, 2 * f);
  st.h = act(nf);
  backend_.swiglu_forward(st.h.template as<T>(), st.gate_up.template as<T>(), n, f);
}

template <typename T>
void LlamaBlock<T>::forward(LayerState& state, std::span<const KVRef> prefix, int batch,
                            const spec::Segment& seg, TypedPtr out, TensorPool& pool) const {
  auto& st = static_cast<LlamaState&>(state);
  saved_forward(st, prefix, batch, seg, pool, true);
  backend_.matmul_forward(out.as<T>(), st.h.template as<T>(), p_.down_w, nullptr,
                          st.x_mid.template as<T>(), batch * seg.length, model_.ffn_hidden,
                          model_.hidden);
}

template <typename T>
void LlamaBlock<T>::recompute(LayerState& state, std::span<const KVRef> prefix, int batch,
                              const spec::Segment& seg, TensorPool& pool) const {
  saved_forward(static_cast<LlamaState&>(state), prefix, batch, seg, pool, false);
}

template <typename T>
void LlamaBlock<T>::backward_input(LayerState& state, std::span<const KVRef> kv, int batch,
                                   const spec::Segment& seg, TypedPtr dx_in,
                                   TensorPool& pool) const {
  constexpr auto kAct = MemoryCategory::kActivations;
  auto& st = static_cast<LlamaState&>(state);
  const int c = model_.hidden, h = model_.heads, kvh = model_.kv_heads, d = model_.head_dim();
  const int k = model_.kv_dim(), f = model_.ffn_hidden;
  const int s = seg.length, n = batch * s;
  const std::size_t nc = static_cast<std::size_t>(n) * c, nf = static_cast<std::size_t>(n) * f;
  int e = 0;
  for (const auto& blk : kv) e += blk.length;
  auto act = [&](std::size_t count) { return pool.acquire_as<T>(kAct, count); };

  // Everything B produces is allocated up front and B's inputs are freed at the end, so the
  // peak inside B has a simple formula (spec/unit_memory.cpp walks it).
  st.d_gate_up = act(2 * nf);
  st.d_n2 = act(nc);
  st.dx_mid = act(nc);
  st.dq = act(nc);
  st.d_n1 = act(nc);
  PooledBuffer d_atty = act(nc);
  PooledBuffer d_h = act(nf);
  PooledBuffer workspace =
      pool.acquire(kAct, backend_.attention_backward_workspace(batch, s, e, h, c / h));

  T* const dx_out = st.dx_out.template as<T>();
  // MLP half, top down.
  backend_.matmul_backward_input(d_h.template as<T>(), dx_out, p_.down_w, n, f, c, false);
  backend_.swiglu_backward(st.d_gate_up.template as<T>(), d_h.template as<T>(),
                           st.gate_up.template as<T>(), n, f);
  backend_.matmul_backward_input(st.d_n2.template as<T>(), st.d_gate_up.template as<T>(),
                                 p_.gate_up_w, n, c, 2 * f, false);
  backend_.rmsnorm_backward_input(st.dx_mid.template as<T>(), dx_out, st.d_n2.template as<T>(),
                                  st.x_mid.template as<T>(), p_.norm2_w, st.rstd2.data(), n, c);
  // Attention half: gradients w.r.t. the rotated q and k, rotated back once complete (dK/dV in
  // its fp32 accumulator, before any rounding).
  backend_.matmul_backward_input(d_atty.template as<T>(), st.dx_mid.template as<T>(), p_.o_w, n,
                                 c, c, false);
  const std::vector<kernels::KVBlock<T>> blocks = typed_blocks<T>(kv);
  backend_.attention_backward(st.dq.template as<T>(), std::span<const kernels::KVBlock<T>>(blocks),
                              d_atty.template as<T>(), st.q.template as<T>(),
                              st.atty.template as<T>(), st.lse.data(), batch, s, c, h, kvh,
                              workspace.data());
  backend_.rotary_backward(st.dq.template as<T>(), batch, s, h, d, c, seg.start,
                           model_.rope_theta);
  backend_.rotary_backward(st.dkv.data(), batch, s, kvh, d, 2 * k, seg.start, model_.rope_theta);
  const T* dkv = complete_dkv<T>(st, pool, backend_);
  backend_.matmul_backward_input(st.d_n1.template as<T>(), st.dq.template as<T>(), p_.q_w, n, c,
                                 c, false);
  backend_.matmul_backward_input(st.d_n1.template as<T>(), dkv, p_.kv_w, n, c, 2 * k, true);
  backend_.rmsnorm_backward_input(dx_in.as<T>(), st.dx_mid.template as<T>(),
                                  st.d_n1.template as<T>(), st.x_in.template as<T>(), p_.norm1_w,
                                  st.rstd1.data(), n, c);

  st.gate_up.reset();
  st.q.reset();
  st.lse.reset();
  st.kv.reset();  // later segments' backwards, the last users of this K/V, ran before this one
}

template <typename T>
void LlamaBlock<T>::backward_weight(LayerState& state, int batch, const spec::Segment& seg) const {
  auto& st = static_cast<LlamaState&>(state);
  const int c = model_.hidden, k = model_.kv_dim(), f = model_.ffn_hidden;
  const int n = batch * seg.length;
  backend_.matmul_backward_weight(g_.down_w, nullptr, st.dx_out.template as<T>(),
                                  st.h.template as<T>(), n, f, c);
  backend_.matmul_backward_weight(g_.gate_up_w, nullptr, st.d_gate_up.template as<T>(),
                                  st.n2.template as<T>(), n, c, 2 * f);
  backend_.rmsnorm_backward_weight(g_.norm2_w, st.d_n2.template as<T>(), st.x_mid.template as<T>(),
                                   st.rstd2.data(), n, c);
  backend_.matmul_backward_weight(g_.o_w, nullptr, st.dx_mid.template as<T>(),
                                  st.atty.template as<T>(), n, c, c);
  backend_.matmul_backward_weight(g_.q_w, nullptr, st.dq.template as<T>(), st.n1.template as<T>(),
                                  n, c, c);
  backend_.matmul_backward_weight(g_.kv_w, nullptr, completed_dkv<T>(st), st.n1.template as<T>(),
                                  n, c, 2 * k);
  backend_.rmsnorm_backward_weight(g_.norm1_w, st.d_n1.template as<T>(), st.x_in.template as<T>(),
                                   st.rstd1.data(), n, c);
  st = LlamaState{};
}

template struct LlamaTensors<float>;
template struct LlamaTensors<bf16>;
template class LlamaBlock<float>;
template class LlamaBlock<bf16>;

}  // namespace plait::model
