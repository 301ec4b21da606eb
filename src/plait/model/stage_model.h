#pragma once
// A pipeline stage of a model of either family (spec/model_spec.h): a contiguous range of
// transformer layers plus, where asked, the embedding and/or the final norm + LM head + loss. Work is done in units — one
// (micro-batch, segment) — as a pipeline schedule issues them: F (forward / forward_loss), B
// (backward_input), W (backward_weight), or B+W fused (backward).
//
// Segments (Seq1F1B, ../shared/reference/seq1f1b.md): a micro-batch's sequence may be cut into
// k contiguous segments of any lengths. Forwards run in order 0..k-1, each attending to the
// cached K/V of the earlier segments (per micro-batch, per layer); backwards run k-1..0, each
// adding dK/dV for the earlier positions into their accumulators. Units of different
// micro-batches may interleave arbitrarily; the batch size (rows) is per micro-batch.
//
// Memory: parameters and gradients are one contiguous buffer each (categories parameters,
// gradients), each a ReservedBuffer whose memory the runtime may release and commit again
// around uses (ZeRO-3's parameters, ZeRO-2's gradients; runtime/sharded_chunk.h) while the
// layers' pointers into it stay valid; a unit's saved activations (activations) and its K/V and dK/dV (kv_cache) live in
// a TensorPool and are released as soon as their last use is done. spec/unit_memory.h gives the
// exact bytes; docs/engine.md explains them.
//
// Recomputation (StageSpec::recompute_layers = r): the stage's first r layers keep only their
// input and K/V from F to B; B rebuilds each one's saved tensors (Block::recompute) just before
// that layer's backward, and from then on the layer holds what it holds without recomputation.
// The gradients are bitwise those of the same stage without recomputation (the rebuild runs
// F's kernels on F's inputs), for the fused and the split backward and any segments.
//
// Precision (StageSpec::precision, spec/precision_policy.h): in bf16 the activations, K/V, the
// stage's inputs and outputs and the weights the kernels read are bf16; parameters() is then the
// fp32 master (charged to optimizer_state, as the memory model counts it) and compute_weights()
// its bf16 copy (charged to parameters), which refresh_compute_weights() rounds from the master
// after every change of the master (an update, a load, a gather). In fp32 both are the same
// buffer and refreshing does nothing.
//
// Backend (kernels/backend.h): the parameters, gradients and pool buffers are the backend's
// memory and every kernel, copy and fill runs through it; the CPU backend is the default. The
// pointers F, B and W take (in, out, grad_out, grad_in) are the backend's memory too, except
// the token ids and targets, which are host memory.
#include <cstdint>
#include <cstddef>
#include <deque>
#include <map>
#include <span>
#include <string_view>
#include <vector>

#include "plait/core/buffer.h"
#include "plait/core/reserved_buffer.h"
#include "plait/core/memory_tracker.h"
#include "plait/kernels/cpu_backend.h"
#include "plait/model/block.h"
#include "plait/model/parameter_layout.h"
#include "plait/model/stage_spec.h"
#include "plait/model/tensor_pool.h"
#include "plait/spec/model_spec.h"
#include "plait/spec/sequence_partition.h"

namespace plait::model {

using spec::Segment;

class StageModel {
 public:
  // Allocates the parameters (zero; call init_parameters) and gradients (zero). With
  // spec.tensor_parallel > 1 the stage is rank spec.tp_rank of that TP group (`tp`, required
  // then and of that size and rank; model/tensor_parallel.h): it holds that rank's part of every
  // tensor and its F, B and W run the group's collectives; the activations it takes and returns
  // (in, out, grad_out, grad_in) are its sequence slice, n/t of a unit's n = batch x s rows.
  StageModel(const spec::ModelSpec& model, StageSpec spec, MemoryTracker& tracker,
             kernels::Backend& backend = kernels::cpu_backend(), TensorParallelGroup* tp = nullptr);
  ~StageModel();
  StageModel(const StageModel&) = delete;
  StageModel& operator=(const StageModel&) = delete;

  const spec::ModelSpec& config() const { return config_; }
  const StageSpec& spec() const { return spec_; }
  MemoryTracker& tracker() const { return tracker_; }
  kernels::Backend& backend() const { return backend_; }

  spec::Precision precision() const { return spec_.precision; }
  // The type of the activations F takes and returns and B's gradients (stage messages).
  DType activation_dtype() const;
  std::size_t activation_bytes() const { return dtype_size(activation_dtype()); }

  std::span<float> parameters() { return parameters_.span(); }
  std::span<const float> parameters() const { return parameters_.span(); }
  std::span<float> gradients() { return gradients_.span(); }
  std::span<const float> gradients() const { return gradients_.span(); }
  // Every tensor with its global name, shape and offset into parameters()/gradients().
  const std::vector<NamedTensor>& tensors() const { return tensors_; }
  std::span<float> parameter(std::string_view name);
  std::span<float> gradient(std::string_view name);
  // The storage behind parameters() and gradients(), for the runtime to decommit while a stage's
  // parameters or gradients are sharded elsewhere and commit (zero-filled) before their use.
  ReservedBuffer<float>& parameter_storage() { return parameters_; }
  ReservedBuffer<float>& gradient_storage() { return gradients_; }
  // The weights the kernels read: parameters() in fp32, its bf16 copy in bf16.
  ConstTypedPtr compute_weights() const;
  ReservedBuffer<bf16>& compute_weight_storage() { return compute_copy_; }
  // bf16: rounds the master's elements [first, first + count) (all by default) into the compute
  // copy; call after anything writes parameters(). fp32: nothing to do.
  void refresh_compute_weights(std::size_t first = 0, std::size_t count = SIZE_MAX);

  // The family's initialisation, deterministic per tensor name (parameter_init.h); a TP rank's
  // part is the part of the whole tensor's draw (so every degree starts from the same model).
  void init_parameters(std::uint64_t seed);

  // Tensor parallelism: the TP group's size and this stage's rank in it (1 and 0 without).
  int tensor_parallel() const { return spec_.tensor_parallel; }
  TensorParallelGroup* tensor_parallel_group() const { return tp_; }
  // All-reduces over the TP group the gradients that are partial on each rank (the norms,
  // computed on the rank's sequence slice: NamedTensor::tp_all_reduced); call once the step's
  // last W on the stage is done, before the gradients are reduced over data parallelism. A
  // no-op without TP.
  void reduce_tensor_parallel_gradients();
  // Whether tensor `index` of tensors() counts in the global gradient norm on this rank: every
  // tensor does without TP; with it a replicated tensor counts on TP rank 0 only.
  bool counts_in_norm(std::size_t index) const {
    return spec_.tp_rank == 0 || !tensors_[index].tp_replicated;
  }
  // Zeroes the gradient buffer (nothing to do while it is decommitted: it commits zero-filled).
  void zero_gradients();

  // F on a stage without the head. in: (batch, s, C) activations from the previous stage
  // (nullptr on the embedding stage); tokens: (batch, s) ids (embedding stage only, else
  // nullptr); out: (batch, s, C). s = segment.length. The inputs are copied; the caller may
  // reuse its buffers once this returns.
  // In bf16, in/out (and grad_out/grad_in below) are bf16: activation_dtype().
  void forward(int microbatch, int batch, Segment segment, ConstTypedPtr in,
               const std::int32_t* tokens, TypedPtr out);

  // F on the head stage: also the loss. targets: (batch, s) ids. Returns
  // loss_scale * sum over the unit's tokens of the cross-entropy; the gradient B/W propagate is
  // that of the returned value (pass 1 / (tokens in the global batch) so the units' returns add
  // up to the mean loss).
  // logits_out (host, optional): receives the unit's logits (batch, s, V) as fp32, as the head
  // computed them before the loss (tests compare generation's logits with these).
  double forward_loss(int microbatch, int batch, Segment segment, ConstTypedPtr in,
                      const std::int32_t* tokens, const std::int32_t* targets, double loss_scale,
                      float* logits_out = nullptr);

  // B: gradient w.r.t. the stage input. grad_out: dL/d(out) (batch, s, C), nullptr on the head
  // stage; grad_in: written with dL/d(in) (batch, s, C), nullptr on the embedding stage.
  void backward_input(int microbatch, Segment segment, ConstTypedPtr grad_out, TypedPtr grad_in);
  // W: accumulates the unit's parameter gradients into gradients(); any time after its B.
  void backward_weight(int microbatch, Segment segment);
  // B and W together, layer by layer (each layer's W right after its B, so its saved state is
  // freed at once). Bitwise the same gradients as backward_input then backward_weight.
  void backward(int microbatch, Segment segment, ConstTypedPtr grad_out, TypedPtr grad_in);

  // Packed documents (issue 24): the document mask of micro-batch `microbatch`'s rows for its
  // next forward -- start[b * stride + p] is where the document holding position p of row b
  // begins (kernels/attention.h, DocumentMask; stride >= the sequence's length). Its units then
  // attend only within each document, and their positions (rotary, GPT-2's learned ones)
  // restart at each document's start (position_runs.h). Call before the micro-batch's first
  // forward (segment 0), on every stage; a micro-batch forwarded without it is one document per
  // row. Host memory held with the micro-batch, outside the tracker (B x stride int32, as the
  // caller's token ids).
  void set_documents(int microbatch, std::vector<std::int32_t> start, int stride);
  // Activation offload (runtime/activation_offload.h): the buffers of the unit (microbatch,
  // segment) in the activations category that hold something now; right after its F, every
  // tensor F left for B and W (spec::UnitMemory::forward_activations, the recomputed layers'
  // inputs only); with `with_kv` also its K/V (kv_cache, spec::UnitMemory::forward_kv), which
  // only the micro-batch's last segment may give up: the later segments of the micro-batch
  // attend to an earlier one's K/V in their F and add into its dK/dV in their B. The pointers
  // stay valid until the unit's W (or the micro-batch's discard); the runtime may move a
  // buffer's contents to the host and back in between, as long as each holds its bytes again
  // before the unit's B. Empty when the unit is not held.
  std::vector<PooledBuffer*> saved_activations(int microbatch, int segment, bool with_kv = false);

  // Drops everything held for a micro-batch (e.g. an evaluation forward with no backward).
  void discard(int microbatch);
  // Micro-batches with state held (0 when every unit has had its W).
  std::size_t microbatches_in_flight() const { return microbatches_.size(); }

  TensorPool& pool() { return pool_; }

  // Generation (forward only, one sequence): a K/V cache per layer of the stage, one contiguous
  // block of up to `capacity` positions each (kv_cache memory), so that each new token costs the
  // work of one position — its projections and MLP, and attention over the positions cached —
  // instead of a forward of the whole prefix. The same blocks and kernels as F run it: a decode
  // step is a segment [start, start + length) whose K/V prefix is the one cached block (Seq1F1B's
  // segment machinery with a single prefix block), after which the segment's K/V rows are
  // appended to the cache and every other saved tensor is released at once.
  //   begin_decode(capacity)  a new sequence (a previous one is dropped); capacity <= max_seq
  //   decode(segment, ...)    positions [start, start + length) with start == decoded_positions()
  //                           (the prompt as one segment, then one token at a time); in, tokens,
  //                           out as for forward with batch 1; the head stage writes the
  //                           segment's logits (length, V) as fp32 into host `logits` instead
  //   end_decode()            frees the cache
  // Independent of training state: call it between steps (no micro-batch in flight needed).
  void begin_decode(std::int64_t capacity);
  void decode(Segment segment, ConstTypedPtr in, const std::int32_t* tokens, TypedPtr out, float* logits);
  std::int64_t decoded_positions() const { return decode_length_; }
  void end_decode();

 private:
  struct HeadState {
    PooledBuffer x_final, lnf, meanf, rstdf, logits, d_lnf;  // meanf: gpt2's LayerNorm only
  };
  // The vocabulary rows this rank's embedding and head hold (all of them without TP): the
  // rows [vocab_begin, vocab_begin + vocab_rows) of the padded table, the first vocab_valid of
  // them real (the rest padding).
  struct VocabularyPart {
    int begin = 0, rows = 0, valid = 0;
  };
  struct UnitState {
    Segment segment;
    bool b_done = false;
    bool w_done = false;
    PooledBuffer tokens, d_embed;
    HeadState head;
    std::vector<std::unique_ptr<LayerState>> layers;
  };
  struct Documents {
    std::vector<std::int32_t> start;  // empty: each row one document
    int stride = 0;
    kernels::DocumentMask mask() const {
      return start.empty() ? kernels::DocumentMask{} : kernels::DocumentMask{start.data(), stride};
    }
  };
  struct MicrobatchState {
    int batch = 0;
    bool backward_started = false;
    Documents documents;
    // By segment index; a deque, so that a later segment's F leaves the earlier units' buffers
    // where they are (activation offload holds pointers to them: saved_activations).
    std::deque<UnitState> units;
  };

  template <typename T>
  double run_forward(int microbatch, int batch, Segment segment, const T* in,
                     const std::int32_t* tokens, T* out, const std::int32_t* targets,
                     double loss_scale, float* logits_out);
  template <typename T>
  double head_forward(UnitState& u, int batch, const std::int32_t* targets, double loss_scale,
                      float* logits_out);
  // The logits (n, V) of a head state as fp32 host values.
  template <typename T>
  void copy_logits_out(const HeadState& hs, int n, float* out) const;
  template <typename T>
  void run_decode(Segment segment, const T* in, const std::int32_t* tokens, T* out, float* logits);
  template <typename T>
  void run_backward(int microbatch, Segment segment, const T* grad_out, T* grad_in, bool fused);
  template <typename T>
  void head_backward_input(UnitState& u, int batch, T* dx);
  template <typename T>
  void head_backward_weight(UnitState& u, int batch);
  template <typename T>
  void embedding_backward_weight(UnitState& u, int batch, kernels::DocumentMask documents);
  // The embedding's F into x (the stage's first input) and the head's cross-entropy, both with
  // or without TP.
  template <typename T>
  void embed(UnitState& u, int batch, kernels::DocumentMask documents, T* x);
  template <typename T>
  double cross_entropy(HeadState& hs, int n, const std::int32_t* targets, double loss_scale);
  // The final norm of the family (gpt2 LayerNorm, llama RMSNorm) over the head's input.
  template <typename T>
  void final_norm_forward(HeadState& hs, int n);
  template <typename T>
  void final_norm_backward_input(HeadState& hs, T* dx, int n) const;
  template <typename T>
  void final_norm_backward_weight(HeadState& hs, int n);
  std::vector<KVRef> kv_blocks(const MicrobatchState& m, int units, int layer,
                               bool with_gradients) const;
  // Checks that a pointer handed in has the stage's activation type.
  void check_dtype(int microbatch, const Segment& segment, DType dtype, const char* what) const;
  // Forgets a micro-batch once every unit has had its W.
  void release_if_finished(int microbatch);
  MicrobatchState& microbatch_state(int microbatch, const Segment& segment, const char* what);
  [[noreturn]] void fail(int microbatch, const Segment& segment, const std::string& problem) const;

  spec::ModelSpec config_;
  StageSpec spec_;
  MemoryTracker& tracker_;
  kernels::Backend& backend_;
  TensorParallelGroup* tp_;
  LocalWidths widths_;
  VocabularyPart vocab_;
  std::vector<NamedTensor> tensors_;
  ReservedBuffer<float> parameters_;
  ReservedBuffer<float> gradients_;
  ReservedBuffer<bf16> compute_copy_;  // bf16 only
  TensorPool pool_;
  std::vector<std::unique_ptr<Block>> blocks_;
  // The embedding and head tensors in the compute weights (null when the stage or family lacks
  // them), and their gradients.
  ConstTypedPtr wte_;
  ConstTypedPtr wpe_;
  ConstTypedPtr lnf_w_;
  ConstTypedPtr lnf_b_;
  ConstTypedPtr head_w_;
  float* wte_grad_ = nullptr;
  float* wpe_grad_ = nullptr;
  float* lnf_w_grad_ = nullptr;
  float* lnf_b_grad_ = nullptr;
  float* head_w_grad_ = nullptr;
  std::map<int, MicrobatchState> microbatches_;
  std::map<int, Documents> next_documents_;  // set_documents's, until the micro-batch's first F
  // Generation: per local layer, the K|V rows (capacity, 2 Ckv) of the positions decoded.
  std::vector<PooledBuffer> decode_cache_;
  std::int64_t decode_capacity_ = 0;
  std::int64_t decode_length_ = 0;
};

}  // namespace plait::model
