#include "plait/model/llama_block.h"

#include "plait/core/memory_category.h"
#include "plait/model/layer_precision.h"
#include "plait/model/position_runs.h"
#include "plait/spec/unit_memory.h"

namespace plait::model {
namespace {

// Rotary positions over x (B, s, stride), forward or backward: the segment's positions, which
// restart at each document of a packed row (position_runs.h).
template <typename X>
void rotate(kernels::Backend& backend, X* x, const LayerState& st, int batch, const spec::Segment& seg,
            int heads, int d, int stride, double theta, bool backward) {
  for_each_position_run(st.documents, batch, seg, [&](int b, int rows, int column, int length, int pos0) {
    X* at = x + (static_cast<std::size_t>(b) * seg.length + column) * stride;
    if (backward) {
      backend.rotary_backward(at, rows, length, heads, d, stride, pos0, theta);
    } else {
      backend.rotary_forward(at, rows, length, heads, d, stride, pos0, theta);
    }
  });
}

}  // namespace

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
  // Under TP (model/tensor_parallel.h): ns = the rank's sequence slice of the n rows; the rank's
  // query heads (cq = C/t wide), K/V heads (k = K/t), FFN columns (f = F/t).
  const int c = model_.hidden, h = w_.heads, kvh = w_.kv_heads, d = model_.head_dim();
  const int cq = w_.q, k = w_.kv, f = w_.ffn;
  const int s = seg.length, n = batch * s, ns = w_.rows(n);
  const std::size_t nsc = static_cast<std::size_t>(ns) * c, nf = static_cast<std::size_t>(n) * f;
  auto act = [&](std::size_t count) { return pool.acquire_as<T>(kAct, count); };
  auto stat = [&](std::size_t count) { return pool.acquire(kAct, count); };

  // Attention half.
  st.n1 = act(nsc);
  st.rstd1 = stat(ns);
  backend_.rmsnorm_forward(st.n1.template as<T>(), st.rstd1.data(), st.x_in.template as<T>(),
                           p_.norm1_w, ns, c, model_.norm_eps);
  {
    PooledBuffer gathered;
    const T* n1 = tp_.gather(gathered, st.n1.template as<T>(), n, c, pool);
    st.q = act(static_cast<std::size_t>(n) * cq);
    backend_.matmul_forward(st.q.template as<T>(), n1, p_.q_w, nullptr, nullptr, n, c, cq);
    if (with_kv) {
      st.kv = pool.acquire_as<T>(MemoryCategory::kKVCache, static_cast<std::size_t>(n) * 2 * k);
      backend_.matmul_forward(st.kv.template as<T>(), n1, p_.kv_w, nullptr, nullptr, n, c, 2 * k);
      rotate(backend_, st.kv.template as<T>(), st, batch, seg, kvh, d, 2 * k, model_.rope_theta, false);
    }
  }
  rotate(backend_, st.q.template as<T>(), st, batch, seg, h, d, cq, model_.rope_theta, false);
  std::vector<kernels::KVBlock<T>> blocks = typed_blocks<T>(prefix);
  blocks.push_back({st.kv.template as<T>(), nullptr, s});
  st.lse = stat(static_cast<std::size_t>(batch) * h * s);
  st.atty = act(static_cast<std::size_t>(n) * cq);
  backend_.attention_forward(st.atty.template as<T>(), st.lse.data(), st.q.template as<T>(),
                             std::span<const kernels::KVBlock<T>>(blocks), batch, s, cq, h, kvh,
                             st.documents);
  st.x_mid = act(nsc);
  tp_.row_parallel_forward(st.x_mid.template as<T>(), st.atty.template as<T>(), p_.o_w, nullptr,
                           st.x_in.template as<T>(), n, cq, c, pool);

  // MLP half, up to the down projection.
  st.n2 = act(nsc);
  st.rstd2 = stat(ns);
  backend_.rmsnorm_forward(st.n2.template as<T>(), st.rstd2.data(), st.x_mid.template as<T>(),
                           p_.norm2_w, ns, c, model_.norm_eps);
  {
    PooledBuffer gathered;
    const T* n2 = tp_.gather(gathered, st.n2.template as<T>(), n, c, pool);
    st.gate_up = act(2 * nf);
    backend_.matmul_forward(st.gate_up.template as<T>(), n2, p_.gate_up_w, nullptr, nullptr, n, c, 2 * f);
  }
  st.h = act(nf);
  backend_.swiglu_forward(st.h.template as<T>(), st.gate_up.template as<T>(), n, f);
}

template <typename T>
void LlamaBlock<T>::forward(LayerState& state, std::span<const KVRef> prefix, int batch,
                            const spec::Segment& seg, TypedPtr out, TensorPool& pool) const {
  auto& st = static_cast<LlamaState&>(state);
  saved_forward(st, prefix, batch, seg, pool, true);
  tp_.row_parallel_forward(out.as<T>(), st.h.template as<T>(), p_.down_w, nullptr, st.x_mid.template as<T>(),
                           batch * seg.length, w_.ffn, model_.hidden, pool);
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
  const int c = model_.hidden, h = w_.heads, kvh = w_.kv_heads, d = model_.head_dim();
  const int cq = w_.q, k = w_.kv, f = w_.ffn;
  const int s = seg.length, n = batch * s, ns = w_.rows(n);
  const std::size_t nsc = static_cast<std::size_t>(ns) * c, nf = static_cast<std::size_t>(n) * f;
  const std::size_t nq = static_cast<std::size_t>(n) * cq;
  int e = 0;
  for (const auto& blk : kv) e += blk.length;
  auto act = [&](std::size_t count) { return pool.acquire_as<T>(kAct, count); };

  // Everything B produces is allocated up front and B's inputs are freed at the end, so the
  // peak inside B has a simple formula (spec/unit_memory.cpp walks it).
  st.d_gate_up = act(2 * nf);
  st.d_n2 = act(nsc);
  st.dx_mid = act(nsc);
  st.dq = act(nq);
  st.d_n1 = act(nsc);
  PooledBuffer d_atty = act(nq);
  PooledBuffer d_h = act(nf);
  PooledBuffer workspace =
      pool.acquire(kAct, backend_.attention_backward_workspace(batch, s, e, h, d));

  T* const dx_out = st.dx_out.template as<T>();
  // MLP half, top down.
  {
    PooledBuffer gathered;
    const T* dy = tp_.gather(gathered, dx_out, n, c, pool);
    backend_.matmul_backward_input(d_h.template as<T>(), dy, p_.down_w, n, f, c, false);
  }
  backend_.swiglu_backward(st.d_gate_up.template as<T>(), d_h.template as<T>(),
                           st.gate_up.template as<T>(), n, f);
  tp_.column_parallel_backward_input(st.d_n2.template as<T>(), {{st.d_gate_up.template as<T>(), p_.gate_up_w, 2 * f}},
                                     n, c, pool);
  backend_.rmsnorm_backward_input(st.dx_mid.template as<T>(), dx_out, st.d_n2.template as<T>(),
                                  st.x_mid.template as<T>(), p_.norm2_w, st.rstd2.data(), ns, c);
  // Attention half: gradients w.r.t. the rotated q and k, rotated back once complete (dK/dV in
  // its fp32 accumulator, before any rounding).
  {
    PooledBuffer gathered;
    const T* dy = tp_.gather(gathered, st.dx_mid.template as<T>(), n, c, pool);
    backend_.matmul_backward_input(d_atty.template as<T>(), dy, p_.o_w, n, cq, c, false);
  }
  const std::vector<kernels::KVBlock<T>> blocks = typed_blocks<T>(kv);
  backend_.attention_backward(st.dq.template as<T>(), std::span<const kernels::KVBlock<T>>(blocks),
                              d_atty.template as<T>(), st.q.template as<T>(),
                              st.atty.template as<T>(), st.lse.data(), batch, s, cq, h, kvh,
                              workspace.data(), st.documents);
  rotate(backend_, st.dq.template as<T>(), st, batch, seg, h, d, cq, model_.rope_theta, true);
  rotate(backend_, st.dkv.data(), st, batch, seg, kvh, d, 2 * k, model_.rope_theta, true);
  const T* dkv = complete_dkv<T>(st, pool, backend_);
  tp_.column_parallel_backward_input(st.d_n1.template as<T>(),
                                     {{st.dq.template as<T>(), p_.q_w, cq}, {dkv, p_.kv_w, 2 * k}}, n, c, pool);
  backend_.rmsnorm_backward_input(dx_in.as<T>(), st.dx_mid.template as<T>(),
                                  st.d_n1.template as<T>(), st.x_in.template as<T>(), p_.norm1_w,
                                  st.rstd1.data(), ns, c);

  st.gate_up.reset();
  st.q.reset();
  st.lse.reset();
  st.kv.reset();  // later segments' backwards, the last users of this K/V, ran before this one
}

template <typename T>
void LlamaBlock<T>::backward_weight(LayerState& state, int batch, const spec::Segment& seg,
                                    TensorPool& pool) const {
  auto& st = static_cast<LlamaState&>(state);
  const int c = model_.hidden, cq = w_.q, k = w_.kv, f = w_.ffn;
  const int n = batch * seg.length, ns = w_.rows(n);
  // Under TP: the gathers again, as Gpt2Block::backward_weight says; the norms' gradients are
  // the slice's.
  {
    PooledBuffer gathered;
    const T* dy = tp_.gather(gathered, st.dx_out.template as<T>(), n, c, pool);
    backend_.matmul_backward_weight(g_.down_w, nullptr, dy, st.h.template as<T>(), n, f, c);
  }
  {
    PooledBuffer gathered;
    const T* n2 = tp_.gather(gathered, st.n2.template as<T>(), n, c, pool);
    backend_.matmul_backward_weight(g_.gate_up_w, nullptr, st.d_gate_up.template as<T>(), n2, n, c, 2 * f);
  }
  backend_.rmsnorm_backward_weight(g_.norm2_w, st.d_n2.template as<T>(), st.x_mid.template as<T>(),
                                   st.rstd2.data(), ns, c);
  {
    PooledBuffer gathered;
    const T* dy = tp_.gather(gathered, st.dx_mid.template as<T>(), n, c, pool);
    backend_.matmul_backward_weight(g_.o_w, nullptr, dy, st.atty.template as<T>(), n, cq, c);
  }
  {
    PooledBuffer gathered;
    const T* n1 = tp_.gather(gathered, st.n1.template as<T>(), n, c, pool);
    backend_.matmul_backward_weight(g_.q_w, nullptr, st.dq.template as<T>(), n1, n, c, cq);
    backend_.matmul_backward_weight(g_.kv_w, nullptr, completed_dkv<T>(st), n1, n, c, 2 * k);
  }
  backend_.rmsnorm_backward_weight(g_.norm1_w, st.d_n1.template as<T>(), st.x_in.template as<T>(),
                                   st.rstd1.data(), ns, c);
  st = LlamaState{};
}

template struct LlamaTensors<float>;
template struct LlamaTensors<bf16>;
template class LlamaBlock<float>;
template class LlamaBlock<bf16>;

}  // namespace plait::model
