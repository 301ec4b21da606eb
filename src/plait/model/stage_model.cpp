#include "plait/model/stage_model.h"

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "plait/core/error.h"
#include "plait/model/parameter_init.h"
#include "plait/model/position_runs.h"
#include "plait/model/tensor_shard_copy.h"
#include "plait/spec/precision_policy.h"

namespace plait::model {
namespace {

constexpr auto kAct = MemoryCategory::kActivations;

std::string range_name(const StageSpec& s) {
  std::string name = "stage [" + std::to_string(s.first_layer) + ", " +
                     std::to_string(s.last_layer) + ")";
  if (s.has_embedding) name += "+embedding";
  if (s.has_head) name += "+head";
  return name;
}

}  // namespace

StageModel::StageModel(const spec::ModelSpec& model, StageSpec spec, MemoryTracker& tracker,
                       kernels::Backend& backend, TensorParallelGroup* tp)
    : config_(model),
      spec_(spec),
      tracker_(tracker),
      backend_(backend),
      tp_(spec.tensor_parallel > 1 ? tp : nullptr),
      widths_(LocalWidths::of(model, std::max(1, spec.tensor_parallel))),
      tensors_(parameter_layout(model, spec)),
      // In bf16 the fp32 buffer is the master copy, which the memory model counts with the
      // optimizer state (spec::parameter_bytes: 2 | 4 | 12 bytes per parameter).
      parameters_(tracker,
                  spec::has_compute_copy(spec.precision) ? MemoryCategory::kOptimizerState
                                                         : MemoryCategory::kParameters,
                  layout_size(tensors_)),
      gradients_(tracker, MemoryCategory::kGradients, layout_size(tensors_)),
      pool_(tracker, backend) {
  if (spec.tensor_parallel > 1) {
    if (tp == nullptr || tp->size() != spec.tensor_parallel || tp->rank() != spec.tp_rank) {
      throw Error(range_name(spec) + ": rank " + std::to_string(spec.tp_rank) + " of a tensor-parallel group of " +
                  std::to_string(spec.tensor_parallel) + " needs that group" +
                  (tp ? " (given rank " + std::to_string(tp->rank()) + " of " + std::to_string(tp->size()) + ")" : ""));
    }
    const auto rows = spec::padded_vocab(model, spec.tensor_parallel) / spec.tensor_parallel;
    vocab_.begin = static_cast<int>(rows * spec.tp_rank);
    vocab_.rows = static_cast<int>(rows);
    vocab_.valid = static_cast<int>(std::clamp<std::int64_t>(model.vocab - vocab_.begin, 0, rows));
  } else {
    vocab_ = {0, model.vocab, model.vocab};
  }
  if (spec::has_compute_copy(spec.precision)) {
    if (!backend_.supports_bf16()) {
      throw Error("the " + std::string(backend_.name()) +
                  " backend has no bf16 kernels (bf16 mixed precision runs on the CPU and CUDA "
                  "backends)");
    }
    compute_copy_ = ReservedBuffer<bf16>(tracker, MemoryCategory::kParameters, layout_size(tensors_));
  }
  const TypedPtr weights(const_cast<void*>(compute_weights().data), compute_weights().dtype);
  blocks_.reserve(static_cast<std::size_t>(spec.layer_count()));
  for (int l = spec.first_layer; l < spec.last_layer; ++l) {
    blocks_.push_back(make_block(config_, l, weights, gradients_.data(), tensors_, backend_, tp_));
  }
  auto locate = [&](const std::string& name, ConstTypedPtr& param, float*& grad) {
    const std::size_t offset = find_tensor(tensors_, name).offset;
    param = compute_weights().offset(offset);
    grad = gradients_.data() + offset;
  };
  if (spec.has_embedding) {
    locate(embedding_tensor_name(config_), wte_, wte_grad_);
    if (config_.learned_positions()) locate("wpe", wpe_, wpe_grad_);
  }
  if (spec.has_head) {
    locate(final_norm_name(config_), lnf_w_, lnf_w_grad_);
    if (config_.has_biases()) locate(final_norm_name(config_, "bias"), lnf_b_, lnf_b_grad_);
    locate(head_tensor_name(config_), head_w_, head_w_grad_);
  }
}

StageModel::~StageModel() = default;

DType StageModel::activation_dtype() const {
  return spec::dtype_of(spec::TensorClass::activation, spec_.precision);
}

ConstTypedPtr StageModel::compute_weights() const {
  if (spec::has_compute_copy(spec_.precision)) return compute_copy_.data();
  return parameters_.data();
}

void StageModel::refresh_compute_weights(std::size_t first, std::size_t count) {
  if (!spec::has_compute_copy(spec_.precision)) return;
  if (first >= parameters_.size()) return;
  count = std::min(count, parameters_.size() - first);
  backend_.convert(compute_copy_.data() + first, parameters_.data() + first, count);
}

void StageModel::check_dtype(int microbatch, const Segment& segment, DType dtype,
                             const char* what) const {
  if (dtype != activation_dtype()) {
    fail(microbatch, segment, std::string(what) + " is " + std::string(dtype_name(dtype)) +
                                  " but the stage computes in " +
                                  std::string(dtype_name(activation_dtype())));
  }
}

std::span<float> StageModel::parameter(std::string_view name) {
  const NamedTensor& t = find_tensor(tensors_, name);
  return parameters().subspan(t.offset, t.numel);
}

std::span<float> StageModel::gradient(std::string_view name) {
  const NamedTensor& t = find_tensor(tensors_, name);
  return gradients().subspan(t.offset, t.numel);
}

void StageModel::init_parameters(std::uint64_t seed) {
  for (const NamedTensor& t : tensors_) {
    if (t.shard.dim < 0) {
      init_tensor(parameter(t.name), t, seed, backend_);
      continue;
    }
    // A TP rank's part: the whole tensor's draw, cut (in host memory: tensor parallelism runs on
    // the CPU backend).
    std::vector<float> whole(t.full_numel());
    NamedTensor all = t;
    all.shape = t.full_shape;
    all.numel = whole.size();
    init_tensor(whole, all, seed, backend_);
    copy_shard_out(whole, t, parameter(t.name));
  }
  refresh_compute_weights();
}

void StageModel::reduce_tensor_parallel_gradients() {
  if (!tp_) return;
  for (const NamedTensor& t : tensors_) {
    if (t.tp_all_reduced) tp_->all_reduce_sum(gradients_.data() + t.offset, t.numel);
  }
}

void StageModel::zero_gradients() {
  if (!gradients_.committed()) return;
  backend_.zero(gradients_.data(), gradients_.size() * sizeof(float));
}

void StageModel::fail(int microbatch, const Segment& segment, const std::string& problem) const {
  throw Error(range_name(spec_) + ": micro-batch " + std::to_string(microbatch) + " segment " +
              std::to_string(segment.index) + ": " + problem);
}

void StageModel::forward(int microbatch, int batch, Segment segment, ConstTypedPtr in,
                         const std::int32_t* tokens, TypedPtr out) {
  if (spec_.has_head) fail(microbatch, segment, "the head stage runs forward_loss, not forward");
  if (!out) fail(microbatch, segment, "forward needs an output buffer");
  check_dtype(microbatch, segment, out.dtype, "the output");
  if (in) check_dtype(microbatch, segment, in.dtype, "the input");
  if (activation_dtype() == DType::bf16) {
    run_forward<bf16>(microbatch, batch, segment, in.as<bf16>(), tokens, out.as<bf16>(), nullptr,
                      0.0, nullptr);
  } else {
    run_forward<float>(microbatch, batch, segment, in.as<float>(), tokens, out.as<float>(),
                       nullptr, 0.0, nullptr);
  }
}

double StageModel::forward_loss(int microbatch, int batch, Segment segment, ConstTypedPtr in,
                                const std::int32_t* tokens, const std::int32_t* targets,
                                double loss_scale, float* logits_out) {
  if (!spec_.has_head) fail(microbatch, segment, "forward_loss needs the stage with the head");
  if (targets == nullptr) fail(microbatch, segment, "forward_loss needs targets");
  if (in) check_dtype(microbatch, segment, in.dtype, "the input");
  if (activation_dtype() == DType::bf16) {
    return run_forward<bf16>(microbatch, batch, segment, in.as<bf16>(), tokens, nullptr, targets,
                             loss_scale, logits_out);
  }
  return run_forward<float>(microbatch, batch, segment, in.as<float>(), tokens, nullptr, targets,
                            loss_scale, logits_out);
}

template <typename T>
double StageModel::run_forward(int microbatch, int batch, Segment seg, const T* in,
                               const std::int32_t* tokens, T* out,
                               const std::int32_t* targets, double loss_scale, float* logits_out) {
  if (batch < 1 || seg.length < 1 || seg.start < 0) {
    fail(microbatch, seg, "needs batch >= 1 and a segment of length >= 1 at a position >= 0");
  }
  if (seg.end() > config_.max_seq) {
    fail(microbatch, seg, "segment [" + std::to_string(seg.start) + ", " +
                              std::to_string(seg.end()) + ") ends past max_seq " +
                              std::to_string(config_.max_seq));
  }
  if (spec_.has_embedding ? tokens == nullptr : in == nullptr) {
    fail(microbatch, seg, spec_.has_embedding ? "the embedding stage needs tokens"
                                              : "a stage without the embedding needs its input");
  }
  MicrobatchState* m = nullptr;
  if (seg.index == 0) {
    if (seg.start != 0) fail(microbatch, seg, "the first segment must start at position 0");
    if (microbatches_.contains(microbatch)) {
      fail(microbatch, seg, "forwarded again while the micro-batch's previous units are held");
    }
    m = &microbatches_[microbatch];
    m->batch = batch;
    if (auto it = next_documents_.find(microbatch); it != next_documents_.end()) {
      m->documents = std::move(it->second);
      next_documents_.erase(it);
      if (m->documents.start.size() != static_cast<std::size_t>(batch) * m->documents.stride) {
        const std::size_t given = m->documents.start.size();
        microbatches_.erase(microbatch);
        fail(microbatch, seg, "its document mask holds " + std::to_string(given) + " positions, expected batch " +
                                  std::to_string(batch) + " x stride");
      }
    }
  } else {
    auto it = microbatches_.find(microbatch);
    if (it == microbatches_.end() || static_cast<int>(it->second.units.size()) != seg.index) {
      fail(microbatch, seg, "forwards of a micro-batch's segments must run in order 0, 1, ...");
    }
    m = &it->second;
    const Segment& prev = m->units.back().segment;
    if (seg.start != prev.end()) {
      fail(microbatch, seg, "starts at " + std::to_string(seg.start) + " but segment " +
                                std::to_string(prev.index) + " ended at " +
                                std::to_string(prev.end()));
    }
    if (batch != m->batch) {
      fail(microbatch, seg, "batch " + std::to_string(batch) + " differs from the micro-batch's " +
                                std::to_string(m->batch));
    }
    if (m->backward_started) fail(microbatch, seg, "forward after the micro-batch's backward began");
  }

  const int nl = spec_.layer_count();
  const int c = config_.hidden;
  const int s = seg.length;
  const int n = batch * s;
  const kernels::DocumentMask documents = m->documents.mask();
  if (documents.start != nullptr && seg.end() > documents.stride) {
    fail(microbatch, seg, "ends at " + std::to_string(seg.end()) + ", past the " +
                              std::to_string(documents.stride) + " positions its document mask covers");
  }
  if (s % widths_.t != 0) {
    fail(microbatch, seg, "a segment of " + std::to_string(s) + " tokens does not split over the tensor-parallel "
                          "group of " + std::to_string(widths_.t) + " (sequence parallelism)");
  }
  // The stage's input, output and residual stream: the rank's sequence slice under TP.
  const std::size_t nc = static_cast<std::size_t>(widths_.rows(n)) * c;
  UnitState& u = m->units.emplace_back();
  u.segment = seg;
  u.layers.reserve(static_cast<std::size_t>(nl));
  for (const auto& block : blocks_) {
    u.layers.push_back(block->make_state());
    u.layers.back()->documents = documents;
  }
  try {
    // The buffer that receives the input of local layer i (i == nl: the head's input, or the
    // stage output).
    auto stream = [&](int i) -> T* {
      if (i < nl) return (u.layers[i]->x_in = pool_.acquire_as<T>(kAct, nc)).template as<T>();
      if (spec_.has_head) return (u.head.x_final = pool_.acquire_as<T>(kAct, nc)).template as<T>();
      return out;
    };
    T* x = stream(0);
    if (spec_.has_embedding) {
      u.tokens = pool_.acquire(kAct, static_cast<std::size_t>(n));
      backend_.copy(u.tokens.ints(), tokens, static_cast<std::size_t>(n) * sizeof(std::int32_t),
                    CopyKind::kHostToDevice);
      embed<T>(u, batch, documents, x);
    } else {
      backend_.copy(x, in, nc * sizeof(T), CopyKind::kDeviceToDevice);
    }
    for (int i = 0; i < nl; ++i) {
      const auto prefix = kv_blocks(*m, seg.index, i, false);
      T* next = stream(i + 1);
      blocks_[i]->forward(*u.layers[i], prefix, batch, seg, next, pool_);
      if (spec_.recomputes(i)) {
        // Keep the input and the K/V (later segments attend to it); B rebuilds the rest.
        std::unique_ptr<LayerState> kept = blocks_[i]->make_state();
        kept->x_in = std::move(u.layers[i]->x_in);
        kept->kv = std::move(u.layers[i]->kv);
        kept->documents = documents;
        u.layers[i] = std::move(kept);
      }
    }
    return spec_.has_head ? head_forward<T>(u, batch, targets, loss_scale, logits_out) : 0.0;
  } catch (...) {
    m->units.pop_back();
    if (m->units.empty()) microbatches_.erase(microbatch);
    throw;
  }
}

// The lookups run over the unit's runs of consecutive positions (position_runs.h: the whole unit
// at once without documents; each document's piece of a row with them, its positions from 0).
template <typename T>
void StageModel::embed(UnitState& u, int batch, kernels::DocumentMask documents, T* x) {
  const int c = config_.hidden, s = u.segment.length, n = batch * s;
  const std::int32_t* tokens = u.tokens.ints();
  auto at = [&](int b, int column) { return static_cast<std::size_t>(b) * s + column; };
  if (!tp_) {
    for_each_position_run(documents, batch, u.segment, [&](int b, int rows, int column, int length, int pos0) {
      backend_.embedding_forward(x + at(b, column) * c, tokens + at(b, column), wte_.as<T>(), wpe_.as<T>(), rows,
                                 length, c, pos0, config_.vocab);
    });
    return;
  }
  // Vocabulary-parallel (spec/tensor_parallel_plan.h): the rank's rows of the table looked up
  // for all n tokens, the position table added by rank 0 alone, summed over the group into each
  // rank's slice.
  PooledBuffer sum = pool_.acquire(MemoryCategory::kCommBuffers, static_cast<std::size_t>(n) * c);
  for_each_position_run(documents, batch, u.segment, [&](int b, int rows, int column, int length, int pos0) {
    backend_.embedding_forward_shard(sum.data() + at(b, column) * c, tokens + at(b, column), wte_.as<T>(),
                                     spec_.tp_rank == 0 ? wpe_.as<T>() : nullptr, rows, length, c, pos0,
                                     config_.vocab, vocab_.begin, vocab_.rows);
  });
  TensorParallelOps<T>(tp_, backend_).finish(x, sum, nullptr, nullptr, n, c);
}

template <typename T>
double StageModel::head_forward(UnitState& u, int batch, const std::int32_t* targets,
                                double loss_scale, float* logits_out) {
  const int c = config_.hidden, v = vocab_.rows;
  const int n = batch * u.segment.length, ns = widths_.rows(n);
  HeadState& hs = u.head;
  hs.lnf = pool_.acquire_as<T>(kAct, static_cast<std::size_t>(ns) * c);
  final_norm_forward<T>(hs, ns);
  {
    // Under TP the vocabulary-parallel head reads the whole normed sequence: gathered.
    PooledBuffer gathered;
    const T* lnf = TensorParallelOps<T>(tp_, backend_).gather(gathered, hs.lnf.as<T>(), n, c, pool_);
    hs.logits = pool_.acquire_as<T>(kAct, static_cast<std::size_t>(n) * v);
    backend_.matmul_forward(hs.logits.as<T>(), lnf, head_w_.as<T>(), nullptr, nullptr, n, c, v);
  }
  if (logits_out != nullptr) {
    // No rank of a TP group holds V logits (the vocabulary-parallel head).
    if (tp_) throw Error(range_name(spec_) + ": the logits of a tensor-parallel head are split over its group");
    copy_logits_out<T>(hs, n, logits_out);
  }
  // The loss gradient is known now; the logits buffer becomes dlogits for B and W.
  return cross_entropy<T>(hs, n, targets, loss_scale);
}

template <typename T>
double StageModel::cross_entropy(HeadState& hs, int n, const std::int32_t* targets, double loss_scale) {
  PooledBuffer losses = pool_.acquire(kAct, n);
  if (!tp_) {
    return backend_.cross_entropy_forward_backward(hs.logits.as<T>(), losses.data(), targets, n,
                                                   vocab_.rows, loss_scale);
  }
  // Vocabulary-parallel (kernels/vocab_parallel_cross_entropy.h): the row maxima, target logits
  // and normalisers reduced over the group between the passes; no rank holds V logits.
  PooledBuffer stats = pool_.acquire(MemoryCategory::kCommBuffers, 4 * static_cast<std::size_t>(n));
  float* max = stats.data();
  float* target = max + n;
  auto* sum = reinterpret_cast<double*>(max + 2 * static_cast<std::size_t>(n));
  T* logits = hs.logits.as<T>();
  backend_.cross_entropy_shard_max(logits, targets, n, vocab_.rows, vocab_.valid, vocab_.begin, config_.vocab, max,
                                   target);
  tp_->all_reduce_max(max, n);
  tp_->all_reduce_sum(target, n);
  backend_.cross_entropy_shard_sum(logits, n, vocab_.rows, vocab_.valid, max, sum);
  tp_->all_reduce_sum(sum, n);
  return backend_.cross_entropy_shard_finish(logits, losses.data(), targets, n, vocab_.rows, vocab_.valid,
                                             vocab_.begin, max, sum, target, loss_scale);
}

std::vector<KVRef> StageModel::kv_blocks(const MicrobatchState& m, int units, int layer,
                                         bool with_gradients) const {
  std::vector<KVRef> blocks;
  blocks.reserve(static_cast<std::size_t>(units) + 1);
  for (int i = 0; i < units; ++i) {
    const LayerState& st = *m.units[i].layers[layer];
    blocks.push_back({ConstTypedPtr(st.kv.as<void>(), st.kv.dtype()),
                      with_gradients ? st.dkv.data() : nullptr, m.units[i].segment.length});
  }
  return blocks;
}

StageModel::MicrobatchState& StageModel::microbatch_state(int microbatch, const Segment& seg,
                                                          const char* what) {
  auto it = microbatches_.find(microbatch);
  if (it == microbatches_.end() || seg.index < 0 ||
      seg.index >= static_cast<int>(it->second.units.size())) {
    fail(microbatch, seg, std::string(what) + " of a unit that has not run forward");
  }
  if (!(it->second.units[seg.index].segment == seg)) {
    fail(microbatch, seg, std::string(what) + " with a segment other than the one forwarded");
  }
  return it->second;
}

namespace {

template <typename F>
void dispatch_backward(DType dtype, ConstTypedPtr grad_out, TypedPtr grad_in, F&& run) {
  if (dtype == DType::bf16) {
    run(grad_out.as<bf16>(), grad_in.as<bf16>());
  } else {
    run(grad_out.as<float>(), grad_in.as<float>());
  }
}

}  // namespace

void StageModel::backward_input(int microbatch, Segment segment, ConstTypedPtr grad_out,
                                TypedPtr grad_in) {
  if (grad_out) check_dtype(microbatch, segment, grad_out.dtype, "grad_out");
  if (grad_in) check_dtype(microbatch, segment, grad_in.dtype, "grad_in");
  dispatch_backward(activation_dtype(), grad_out, grad_in, [&](auto* g_out, auto* g_in) {
    run_backward(microbatch, segment, g_out, g_in, false);
  });
}

void StageModel::backward(int microbatch, Segment segment, ConstTypedPtr grad_out,
                          TypedPtr grad_in) {
  if (grad_out) check_dtype(microbatch, segment, grad_out.dtype, "grad_out");
  if (grad_in) check_dtype(microbatch, segment, grad_in.dtype, "grad_in");
  dispatch_backward(activation_dtype(), grad_out, grad_in, [&](auto* g_out, auto* g_in) {
    run_backward(microbatch, segment, g_out, g_in, true);
  });
}

template <typename T>
void StageModel::run_backward(int microbatch, Segment seg, const T* grad_out, T* grad_in,
                              bool fused) {
  MicrobatchState& m = microbatch_state(microbatch, seg, "backward");
  // Backwards run from the last forwarded segment down: the next one is the highest without B.
  int next = static_cast<int>(m.units.size()) - 1;
  while (next >= 0 && m.units[next].b_done) --next;
  if (seg.index != next) {
    fail(microbatch, seg, "backwards of a micro-batch's segments must run in order k-1, ..., 0 "
                          "(expected segment " + std::to_string(next) + ")");
  }
  if (spec_.has_head != (grad_out == nullptr)) {
    fail(microbatch, seg, spec_.has_head ? "the head stage takes no grad_out"
                                         : "backward needs grad_out");
  }
  if (spec_.has_embedding != (grad_in == nullptr)) {
    fail(microbatch, seg, spec_.has_embedding ? "the embedding stage takes no grad_in"
                                              : "backward needs grad_in");
  }
  const int nl = spec_.layer_count();
  const int c = config_.hidden;
  const int batch = m.batch;
  const int s = seg.length;
  const std::size_t nc = static_cast<std::size_t>(widths_.rows(batch * s)) * c;  // the rank's slice

  // The micro-batch's first backward allocates every unit's dK/dV accumulator: this unit's
  // attention backward adds into all earlier positions.
  if (!m.backward_started) {
    for (UnitState& earlier : m.units) {
      const std::size_t n_i =
          static_cast<std::size_t>(batch) * earlier.segment.length * widths_.kv;
      for (auto& st : earlier.layers) {
        st->dkv = pool_.acquire_zeroed(MemoryCategory::kKVCache, 2 * n_i);
      }
    }
    m.backward_started = true;
  }

  UnitState& u = m.units[seg.index];
  // The buffer that receives dL/d(input of local layer i) (i == nl: of the head's input).
  auto grad_target = [&](int i) -> T* {
    if (i > 0) return (u.layers[i - 1]->dx_out = pool_.acquire_as<T>(kAct, nc)).template as<T>();
    if (spec_.has_embedding) return (u.d_embed = pool_.acquire_as<T>(kAct, nc)).template as<T>();
    return grad_in;
  };
  T* top = grad_target(nl);
  if (spec_.has_head) {
    head_backward_input<T>(u, batch, top);
    if (fused) head_backward_weight<T>(u, batch);
  } else {
    backend_.copy(top, grad_out, nc * sizeof(T), CopyKind::kDeviceToDevice);
  }
  for (int i = nl - 1; i >= 0; --i) {
    T* dst = grad_target(i);
    if (spec_.recomputes(i)) {
      blocks_[i]->recompute(*u.layers[i], kv_blocks(m, seg.index, i, false), batch, seg, pool_);
    }
    const auto blocks = kv_blocks(m, seg.index + 1, i, true);
    blocks_[i]->backward_input(*u.layers[i], blocks, batch, seg, dst, pool_);
    if (fused) blocks_[i]->backward_weight(*u.layers[i], batch, seg, pool_);
  }
  u.b_done = true;
  if (fused) {
    if (spec_.has_embedding) embedding_backward_weight<T>(u, batch, m.documents.mask());
    u.w_done = true;
    release_if_finished(microbatch);
  }
}

void StageModel::backward_weight(int microbatch, Segment seg) {
  MicrobatchState& m = microbatch_state(microbatch, seg, "backward_weight");
  UnitState& u = m.units[seg.index];
  if (!u.b_done) fail(microbatch, seg, "backward_weight before backward_input");
  if (u.w_done) fail(microbatch, seg, "backward_weight ran twice");
  // Same order as the fused backward: head, layers top down, embedding.
  const bool bf = activation_dtype() == DType::bf16;
  if (spec_.has_head) bf ? head_backward_weight<bf16>(u, m.batch) : head_backward_weight<float>(u, m.batch);
  for (int i = spec_.layer_count() - 1; i >= 0; --i) {
    blocks_[i]->backward_weight(*u.layers[i], m.batch, seg, pool_);
  }
  if (spec_.has_embedding) {
    const kernels::DocumentMask documents = m.documents.mask();
    bf ? embedding_backward_weight<bf16>(u, m.batch, documents)
       : embedding_backward_weight<float>(u, m.batch, documents);
  }
  u.w_done = true;
  release_if_finished(microbatch);
}

void StageModel::release_if_finished(int microbatch) {
  auto it = microbatches_.find(microbatch);
  for (const UnitState& unit : it->second.units) {
    if (!unit.w_done) return;
  }
  microbatches_.erase(it);
}

template <typename T>
void StageModel::head_backward_input(UnitState& u, int batch, T* dx) {
  const int c = config_.hidden, v = vocab_.rows;
  const int n = batch * u.segment.length, ns = widths_.rows(n);
  HeadState& hs = u.head;
  hs.d_lnf = pool_.acquire_as<T>(kAct, static_cast<std::size_t>(ns) * c);
  TensorParallelOps<T>(tp_, backend_).column_parallel_backward_input(
      hs.d_lnf.as<T>(), {{hs.logits.as<T>(), head_w_.as<T>(), v}}, n, c, pool_);
  final_norm_backward_input<T>(hs, dx, ns);
}

template <typename T>
void StageModel::head_backward_weight(UnitState& u, int batch) {
  const int c = config_.hidden, v = vocab_.rows;
  const int n = batch * u.segment.length, ns = widths_.rows(n);
  HeadState& hs = u.head;
  {
    PooledBuffer gathered;
    const T* lnf = TensorParallelOps<T>(tp_, backend_).gather(gathered, hs.lnf.as<T>(), n, c, pool_);
    backend_.matmul_backward_weight(head_w_grad_, nullptr, hs.logits.as<T>(), lnf, n, c, v);
  }
  final_norm_backward_weight<T>(hs, ns);
  hs = HeadState{};
}

template <typename T>
void StageModel::final_norm_forward(HeadState& hs, int n) {
  const int c = config_.hidden;
  hs.rstdf = pool_.acquire(kAct, static_cast<std::size_t>(n));
  if (config_.family == spec::Family::gpt2) {
    hs.meanf = pool_.acquire(kAct, static_cast<std::size_t>(n));
    backend_.layernorm_forward(hs.lnf.as<T>(), hs.meanf.data(), hs.rstdf.data(),
                               hs.x_final.as<T>(), lnf_w_.as<T>(), lnf_b_.as<T>(), n, c,
                               config_.norm_eps);
  } else {
    backend_.rmsnorm_forward(hs.lnf.as<T>(), hs.rstdf.data(), hs.x_final.as<T>(), lnf_w_.as<T>(),
                             n, c, config_.norm_eps);
  }
}

template <typename T>
void StageModel::final_norm_backward_input(HeadState& hs, T* dx, int n) const {
  const int c = config_.hidden;
  const T* no_residual = nullptr;
  if (config_.family == spec::Family::gpt2) {
    backend_.layernorm_backward_input(dx, no_residual, hs.d_lnf.as<T>(), hs.x_final.as<T>(),
                                      lnf_w_.as<T>(), hs.meanf.data(), hs.rstdf.data(), n, c);
  } else {
    backend_.rmsnorm_backward_input(dx, no_residual, hs.d_lnf.as<T>(), hs.x_final.as<T>(),
                                    lnf_w_.as<T>(), hs.rstdf.data(), n, c);
  }
}

template <typename T>
void StageModel::final_norm_backward_weight(HeadState& hs, int n) {
  const int c = config_.hidden;
  if (config_.family == spec::Family::gpt2) {
    backend_.layernorm_backward_weight(lnf_w_grad_, lnf_b_grad_, hs.d_lnf.as<T>(),
                                       hs.x_final.as<T>(), hs.meanf.data(), hs.rstdf.data(), n, c);
  } else {
    backend_.rmsnorm_backward_weight(lnf_w_grad_, hs.d_lnf.as<T>(), hs.x_final.as<T>(),
                                     hs.rstdf.data(), n, c);
  }
}

template <typename T>
void StageModel::embedding_backward_weight(UnitState& u, int batch, kernels::DocumentMask documents) {
  const int c = config_.hidden, s = u.segment.length;
  const std::int32_t* tokens = u.tokens.ints();
  auto at = [&](int b, int column) { return static_cast<std::size_t>(b) * s + column; };
  if (!tp_) {
    const T* dout = u.d_embed.as<T>();
    for_each_position_run(documents, batch, u.segment, [&](int b, int rows, int column, int length, int pos0) {
      backend_.embedding_backward(wte_grad_, wpe_grad_, dout + at(b, column) * c, tokens + at(b, column), rows,
                                  length, c, pos0, config_.vocab);
    });
  } else {
    // The rank's rows of the table and the whole position table from the gathered gradient of
    // the embedding's output (no reduction of either over the group needed).
    PooledBuffer gathered;
    const T* dout = TensorParallelOps<T>(tp_, backend_).gather(gathered, u.d_embed.as<T>(), batch * s, c, pool_);
    for_each_position_run(documents, batch, u.segment, [&](int b, int rows, int column, int length, int pos0) {
      backend_.embedding_backward_shard(wte_grad_, wpe_grad_, dout + at(b, column) * c, tokens + at(b, column), rows,
                                        length, c, pos0, vocab_.begin, vocab_.rows);
    });
  }
  u.tokens.reset();
  u.d_embed.reset();
}

void StageModel::set_documents(int microbatch, std::vector<std::int32_t> start, int stride) {
  if (stride < 1) throw Error(range_name(spec_) + ": micro-batch " + std::to_string(microbatch) + ": a document mask of stride " + std::to_string(stride));
  next_documents_[microbatch] = Documents{std::move(start), stride};
}

void StageModel::discard(int microbatch) { microbatches_.erase(microbatch); }

std::vector<PooledBuffer*> StageModel::saved_activations(int microbatch, int segment, bool with_kv) {
  std::vector<PooledBuffer*> all, out;
  auto it = microbatches_.find(microbatch);
  if (it == microbatches_.end() || segment < 0 || segment >= static_cast<int>(it->second.units.size())) return out;
  UnitState& u = it->second.units[static_cast<std::size_t>(segment)];
  for (PooledBuffer* b : {&u.tokens, &u.d_embed, &u.head.x_final, &u.head.lnf, &u.head.meanf, &u.head.rstdf,
                          &u.head.logits, &u.head.d_lnf}) {
    all.push_back(b);
  }
  for (auto& layer : u.layers) layer->buffers(all);
  for (PooledBuffer* b : all) {
    // After F the unit's only kv_cache buffers are its K/V (the dK/dV come with the first B).
    const bool kv = with_kv && b->category() == MemoryCategory::kKVCache;
    if (!b->empty() && (b->category() == MemoryCategory::kActivations || kv)) out.push_back(b);
  }
  return out;
}

template <typename T>
void StageModel::copy_logits_out(const HeadState& hs, int n, float* out) const {
  const std::size_t count = static_cast<std::size_t>(n) * config_.vocab;
  if constexpr (std::is_same_v<T, float>) {
    backend_.copy(out, hs.logits.as<float>(), count * sizeof(float), CopyKind::kDeviceToHost);
  } else {
    std::vector<T> host(count);
    backend_.copy(host.data(), hs.logits.as<T>(), count * sizeof(T), CopyKind::kDeviceToHost);
    for (std::size_t i = 0; i < count; ++i) out[i] = to_float(host[i]);
  }
}

void StageModel::begin_decode(std::int64_t capacity) {
  end_decode();
  if (tp_) throw Error(range_name(spec_) + ": decode runs on a whole stage, not a tensor-parallel rank's part");
  if (capacity < 1 || capacity > config_.max_seq) {
    throw Error(range_name(spec_) + ": decode: a capacity of " + std::to_string(capacity) +
                " positions; expected 1.." + std::to_string(config_.max_seq) + " (max_seq)");
  }
  const DType kv_type = activation_dtype();
  const std::size_t rows = static_cast<std::size_t>(capacity) * 2 * config_.kv_dim();
  for (int i = 0; i < spec_.layer_count(); ++i) {
    decode_cache_.push_back(kv_type == DType::bf16 ? pool_.acquire_as<bf16>(MemoryCategory::kKVCache, rows)
                                                   : pool_.acquire_as<float>(MemoryCategory::kKVCache, rows));
  }
  decode_capacity_ = capacity;
  decode_length_ = 0;
}

void StageModel::end_decode() {
  decode_cache_.clear();
  decode_capacity_ = 0;
  decode_length_ = 0;
}

void StageModel::decode(Segment segment, ConstTypedPtr in, const std::int32_t* tokens, TypedPtr out,
                        float* logits) {
  const auto fail = [&](const std::string& problem) { throw Error(range_name(spec_) + ": decode: " + problem); };
  if (decode_capacity_ == 0) fail("decode before begin_decode");
  if (segment.start != decode_length_ || segment.length < 1 || segment.end() > decode_capacity_) {
    fail("positions [" + std::to_string(segment.start) + ", " + std::to_string(segment.end()) +
                          "): expected a segment starting at " + std::to_string(decode_length_) +
                          " (the positions cached) and ending by " + std::to_string(decode_capacity_) + " (the capacity)");
  }
  if (spec_.has_embedding ? tokens == nullptr : !in) {
    fail(spec_.has_embedding ? "the embedding stage needs tokens" : "a stage without the embedding needs its input");
  }
  if (spec_.has_head ? logits == nullptr : !out) {
    fail(spec_.has_head ? "the head stage writes logits" : "a stage without the head needs an output buffer");
  }
  if (in) check_dtype(-1, segment, in.dtype, "the input");
  if (out) check_dtype(-1, segment, out.dtype, "the output");
  if (activation_dtype() == DType::bf16) {
    run_decode<bf16>(segment, in.as<bf16>(), tokens, out.as<bf16>(), logits);
  } else {
    run_decode<float>(segment, in.as<float>(), tokens, out.as<float>(), logits);
  }
  decode_length_ = segment.end();
}

template <typename T>
void StageModel::run_decode(Segment seg, const T* in, const std::int32_t* tokens, T* out, float* logits) {
  const int c = config_.hidden, s = seg.length, nl = spec_.layer_count();
  const std::size_t nc = static_cast<std::size_t>(s) * c;
  const std::size_t kv_row = 2 * static_cast<std::size_t>(config_.kv_dim());
  // The stream between layers: layer i reads `x`, writes `next`; the two swap.
  PooledBuffer x = pool_.acquire_as<T>(kAct, nc), next;
  if (spec_.has_embedding) {
    PooledBuffer ids = pool_.acquire(kAct, static_cast<std::size_t>(s));
    backend_.copy(ids.ints(), tokens, static_cast<std::size_t>(s) * sizeof(std::int32_t), CopyKind::kHostToDevice);
    backend_.embedding_forward(x.as<T>(), ids.ints(), wte_.as<T>(), wpe_.as<T>(), 1, s, c, seg.start, config_.vocab);
  } else {
    backend_.copy(x.as<T>(), in, nc * sizeof(T), CopyKind::kDeviceToDevice);
  }
  for (int i = 0; i < nl; ++i) {
    std::unique_ptr<LayerState> st = blocks_[i]->make_state();
    st->x_in = std::move(x);
    std::vector<KVRef> prefix;
    const T* cache = decode_cache_[static_cast<std::size_t>(i)].as<T>();
    if (seg.start > 0) prefix.push_back({ConstTypedPtr(cache, dtype_of<T>()), nullptr, seg.start});
    next = pool_.acquire_as<T>(kAct, nc);
    blocks_[i]->forward(*st, prefix, 1, seg, next.as<T>(), pool_);
    // This segment's K|V rows join the cache (batch 1: the rows of positions [start, end)).
    backend_.copy(decode_cache_[static_cast<std::size_t>(i)].as<T>() + static_cast<std::size_t>(seg.start) * kv_row,
                  st->kv.as<T>(), static_cast<std::size_t>(s) * kv_row * sizeof(T), CopyKind::kDeviceToDevice);
    x = std::move(next);
  }
  if (!spec_.has_head) {
    backend_.copy(out, x.as<T>(), nc * sizeof(T), CopyKind::kDeviceToDevice);
    return;
  }
  HeadState hs;
  hs.x_final = std::move(x);
  hs.lnf = pool_.acquire_as<T>(kAct, nc);
  final_norm_forward<T>(hs, s);
  hs.logits = pool_.acquire_as<T>(kAct, static_cast<std::size_t>(s) * config_.vocab);
  backend_.matmul_forward(hs.logits.as<T>(), hs.lnf.as<T>(), head_w_.as<T>(), nullptr, nullptr, s, c, config_.vocab);
  copy_logits_out<T>(hs, s, logits);
}

}  // namespace plait::model
