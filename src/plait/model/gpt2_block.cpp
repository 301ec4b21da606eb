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
  // Under TP (model/tensor_parallel.h): ns = the rank's sequence slice of the n rows; q, K/V and
  // the attention output are cq = C/t wide (the rank's heads), the MLP ffn = F/t.
  const int c = model_.hidden, h = w_.heads, cq = w_.q, f = w_.ffn;
  const int s = seg.length;
  const int n = batch * s, ns = w_.rows(n);
  const std::size_t nsc = static_cast<std::size_t>(ns) * c;
  auto act = [&](std::size_t count) { return pool.acquire_as<T>(kAct, count); };
  auto stat = [&](std::size_t count) { return pool.acquire(kAct, count); };

  // Attention half.
  st.ln1 = act(nsc);
  st.mean1 = stat(ns);
  st.rstd1 = stat(ns);
  backend_.layernorm_forward(st.ln1.template as<T>(), st.mean1.data(), st.rstd1.data(),
                             st.x_in.template as<T>(), p_.ln1_w, p_.ln1_b, ns, c, model_.norm_eps);
  {
    PooledBuffer gathered;
    const T* ln1 = tp_.gather(gathered, st.ln1.template as<T>(), n, c, pool);
    st.q = act(static_cast<std::size_t>(n) * cq);
    backend_.matmul_forward(st.q.template as<T>(), ln1, p_.attn_w, p_.attn_b, nullptr, n, c, cq);
    if (with_kv) {
      st.kv = pool.acquire_as<T>(MemoryCategory::kKVCache, static_cast<std::size_t>(n) * 2 * cq);
      backend_.matmul_forward(st.kv.template as<T>(), ln1, p_.attn_w + static_cast<std::size_t>(cq) * c,
                              p_.attn_b + cq, nullptr, n, c, 2 * cq);
    }
  }
  std::vector<kernels::KVBlock<T>> blocks = typed_blocks<T>(prefix);
  blocks.push_back({st.kv.template as<T>(), nullptr, s});
  st.lse = stat(static_cast<std::size_t>(batch) * h * s);
  st.atty = act(static_cast<std::size_t>(n) * cq);
  // GPT-2 is multi-head attention: every query head has its own K/V head (kv_heads = heads).
  backend_.attention_forward(st.atty.template as<T>(), st.lse.data(), st.q.template as<T>(),
                             std::span<const kernels::KVBlock<T>>(blocks), batch, s, cq, h, h,
                             st.documents);
  st.x_mid = act(nsc);
  tp_.row_parallel_forward(st.x_mid.template as<T>(), st.atty.template as<T>(), p_.proj_w, p_.proj_b,
                           st.x_in.template as<T>(), n, cq, c, pool);

  // MLP half, up to the output projection.
  st.ln2 = act(nsc);
  st.mean2 = stat(ns);
  st.rstd2 = stat(ns);
  backend_.layernorm_forward(st.ln2.template as<T>(), st.mean2.data(), st.rstd2.data(),
                             st.x_mid.template as<T>(), p_.ln2_w, p_.ln2_b, ns, c, model_.norm_eps);
  const std::size_t nf = static_cast<std::size_t>(n) * f;
  {
    PooledBuffer gathered;
    const T* ln2 = tp_.gather(gathered, st.ln2.template as<T>(), n, c, pool);
    st.fc_pre = act(nf);
    backend_.matmul_forward(st.fc_pre.template as<T>(), ln2, p_.fc_w, p_.fc_b, nullptr, n, c, f);
  }
  st.fc_gelu = act(nf);
  backend_.gelu_forward(st.fc_gelu.template as<T>(), st.fc_pre.template as<T>(), nf);
}

template <typename T>
void Gpt2Block<T>::forward(LayerState& state, std::span<const KVRef> prefix, int batch,
                           const spec::Segment& seg, TypedPtr out, TensorPool& pool) const {
  auto& st = static_cast<Gpt2State&>(state);
  saved_forward(st, prefix, batch, seg, pool, true);
  tp_.row_parallel_forward(out.as<T>(), st.fc_gelu.template as<T>(), p_.fcproj_w, p_.fcproj_b,
                           st.x_mid.template as<T>(), batch * seg.length, w_.ffn, model_.hidden, pool);
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
  const int c = model_.hidden, h = w_.heads, cq = w_.q, f = w_.ffn;
  const int s = seg.length;
  const int n = batch * s, ns = w_.rows(n);
  const std::size_t nsc = static_cast<std::size_t>(ns) * c, nq = static_cast<std::size_t>(n) * cq;
  int e = 0;
  for (const auto& blk : kv) e += blk.length;
  auto act = [&](std::size_t count) { return pool.acquire_as<T>(kAct, count); };

  // Everything B produces is allocated up front and B's inputs are freed at the end, so the
  // peak inside B has a simple formula (docs/engine.md).
  const std::size_t nf = static_cast<std::size_t>(n) * f;
  st.d_fc_pre = act(nf);
  st.d_ln2 = act(nsc);
  st.dx_mid = act(nsc);
  st.dq = act(nq);
  st.d_ln1 = act(nsc);
  PooledBuffer d_atty = act(nq);
  PooledBuffer workspace =
      pool.acquire(kAct, backend_.attention_backward_workspace(batch, s, e, h, cq / h));

  T* const dx_out = st.dx_out.template as<T>();
  // MLP half, top down.
  {
    PooledBuffer gathered;
    const T* dy = tp_.gather(gathered, dx_out, n, c, pool);
    backend_.matmul_backward_input(st.d_fc_pre.template as<T>(), dy, p_.fcproj_w, n, f, c, false);
  }
  backend_.gelu_backward(st.d_fc_pre.template as<T>(), st.fc_pre.template as<T>(),
                         st.d_fc_pre.template as<T>(), nf);
  tp_.column_parallel_backward_input(st.d_ln2.template as<T>(), {{st.d_fc_pre.template as<T>(), p_.fc_w, f}}, n,
                                     c, pool);
  backend_.layernorm_backward_input(st.dx_mid.template as<T>(), dx_out, st.d_ln2.template as<T>(),
                                    st.x_mid.template as<T>(), p_.ln2_w, st.mean2.data(),
                                    st.rstd2.data(), ns, c);
  // Attention half.
  {
    PooledBuffer gathered;
    const T* dy = tp_.gather(gathered, st.dx_mid.template as<T>(), n, c, pool);
    backend_.matmul_backward_input(d_atty.template as<T>(), dy, p_.proj_w, n, cq, c, false);
  }
  const std::vector<kernels::KVBlock<T>> blocks = typed_blocks<T>(kv);
  backend_.attention_backward(st.dq.template as<T>(), std::span<const kernels::KVBlock<T>>(blocks),
                              d_atty.template as<T>(), st.q.template as<T>(),
                              st.atty.template as<T>(), st.lse.data(), batch, s, cq, h, h,
                              workspace.data(), st.documents);
  const T* dkv = complete_dkv<T>(st, pool, backend_);
  tp_.column_parallel_backward_input(
      st.d_ln1.template as<T>(),
      {{st.dq.template as<T>(), p_.attn_w, cq}, {dkv, p_.attn_w + static_cast<std::size_t>(cq) * c, 2 * cq}}, n, c,
      pool);
  backend_.layernorm_backward_input(dx_in.as<T>(), st.dx_mid.template as<T>(),
                                    st.d_ln1.template as<T>(), st.x_in.template as<T>(), p_.ln1_w,
                                    st.mean1.data(), st.rstd1.data(), ns, c);

  st.fc_pre.reset();
  st.q.reset();
  st.lse.reset();
  st.kv.reset();  // later segments' backwards, the last users of this K/V, ran before this one
}

template <typename T>
void Gpt2Block<T>::backward_weight(LayerState& state, int batch, const spec::Segment& seg,
                                   TensorPool& pool) const {
  auto& st = static_cast<Gpt2State&>(state);
  const int c = model_.hidden, cq = w_.q, f = w_.ffn;
  const int n = batch * seg.length, ns = w_.rows(n);
  // Under TP the row-parallel weights need their whole output gradient and the column-parallel
  // ones their whole input, each gathered again here (spec/tensor_parallel_plan.h); the
  // row-parallel biases' gradients come whole from the gathered output gradient; the norms'
  // are the slice's (all-reduced over the group after the step's last W).
  {
    PooledBuffer gathered;
    const T* dy = tp_.gather(gathered, st.dx_out.template as<T>(), n, c, pool);
    backend_.matmul_backward_weight(g_.fcproj_w, g_.fcproj_b, dy, st.fc_gelu.template as<T>(), n, f, c);
  }
  {
    PooledBuffer gathered;
    const T* ln2 = tp_.gather(gathered, st.ln2.template as<T>(), n, c, pool);
    backend_.matmul_backward_weight(g_.fc_w, g_.fc_b, st.d_fc_pre.template as<T>(), ln2, n, c, f);
  }
  backend_.layernorm_backward_weight(g_.ln2_w, g_.ln2_b, st.d_ln2.template as<T>(),
                                     st.x_mid.template as<T>(), st.mean2.data(), st.rstd2.data(),
                                     ns, c);
  {
    PooledBuffer gathered;
    const T* dy = tp_.gather(gathered, st.dx_mid.template as<T>(), n, c, pool);
    backend_.matmul_backward_weight(g_.proj_w, g_.proj_b, dy, st.atty.template as<T>(), n, cq, c);
  }
  {
    PooledBuffer gathered;
    const T* ln1 = tp_.gather(gathered, st.ln1.template as<T>(), n, c, pool);
    backend_.matmul_backward_weight(g_.attn_w, g_.attn_b, st.dq.template as<T>(), ln1, n, c, cq);
    backend_.matmul_backward_weight(g_.attn_w + static_cast<std::size_t>(cq) * c, g_.attn_b + cq,
                                    completed_dkv<T>(st), ln1, n, c, 2 * cq);
  }
  backend_.layernorm_backward_weight(g_.ln1_w, g_.ln1_b, st.d_ln1.template as<T>(),
                                     st.x_in.template as<T>(), st.mean1.data(), st.rstd1.data(),
                                     ns, c);
  st = Gpt2State{};
}

template struct Gpt2Tensors<float>;
template struct Gpt2Tensors<bf16>;
template class Gpt2Block<float>;
template class Gpt2Block<bf16>;

}  // namespace plait::model
