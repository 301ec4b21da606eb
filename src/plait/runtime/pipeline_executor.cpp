#include "plait/runtime/pipeline_executor.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>

#include "plait/comm/backoff.h"
#include "plait/core/error.h"
#include "plait/core/monotonic_clock.h"
#include "plait/core/progress.h"
#include "plait/core/thread_cpu_clock.h"
#include "plait/data/document_mask.h"
#include "plait/data/segment_columns.h"
#include "plait/runtime/microbatch_partition.h"
#include "plait/runtime/reshard.h"
#include "plait/runtime/tensor_parallel_group.h"
#include "plait/spec/precision_policy.h"

namespace plait::runtime {

struct PipelineExecutor::MicrobatchData {
  std::vector<std::int32_t> inputs, targets;  // (batch, seq), row-major
  int uses_left = 0;
};

namespace {

// A message's pieces (one without resharding; runtime/reshard.h), complete when all are.
struct Pieces {
  std::vector<comm::Request> requests;
  bool test() { return comm::test_all(requests); }
  void wait() { comm::wait_all(requests); }
  // The first piece still in flight (for the stall watchdog and the back-off).
  const comm::Request& pending() const {
    for (const comm::Request& r : requests) {
      if (r.active()) return r;
    }
    return requests.front();
  }
};

}  // namespace

struct PipelineExecutor::Posted {
  model::PooledBuffer buffer;
  Pieces request;
};

struct PipelineExecutor::Sending {
  model::PooledBuffer buffer;
  Pieces request;
  std::size_t event = 0;  // index of its trace event (end time set on completion), or npos
  double posted_at = 0;   // monotonic seconds of its isend
};

struct PipelineExecutor::State {
  std::unordered_map<std::int32_t, Posted> posted;
  std::unordered_map<std::int64_t, model::PooledBuffer> local;
  std::vector<Sending> sending;
  std::map<int, MicrobatchData> data;
  std::vector<std::int32_t> seg_tokens, seg_targets;
  // Work-aware cuts of this step's micro-batches (PipelinePlan::document_cuts), cut on first use.
  std::map<int, spec::SequencePartition> cuts;
  const data::BatchSource* batches = nullptr;
  std::int64_t step = 0;
  ExecutedStep* result = nullptr;
  bool record = false;
  double start = 0;
};

namespace {

// F, B (with fused BW), W: RankStepTimes's order.
std::size_t unit_kind_index(schedule::ActionKind k) {
  switch (k) {
    case schedule::ActionKind::F:
      return 0;
    case schedule::ActionKind::B:
    case schedule::ActionKind::BW:
      return 1;
    case schedule::ActionKind::W:
      return 2;
  }
  return 0;
}

TypedPtr typed(const model::PooledBuffer& b) {
  if (b.empty()) return {};
  return {b.as<void>(), b.dtype()};
}

}  // namespace

DType PipelineExecutor::message_dtype() const {
  return spec::dtype_of(spec::TensorClass::stage_message, plan_.precision);
}

PipelineExecutor::PipelineExecutor(const PipelinePlan& plan, RankProgram program,
                                   comm::Communicator& world, std::vector<model::StageModel*> chunks,
                                   ShardedDataParallel& data_parallel, MemoryTracker& buffers,
                                   ExecutorMode mode, MemoryTracker* host, CopyEngine* copies)
    : plan_(plan),
      program_(std::move(program)),
      world_(world),
      tp_rank_(plan.tp_rank_of(world.rank())),
      chunks_(std::move(chunks)),
      dp_(data_parallel),
      mode_(mode),
      pool_(buffers),
      // When the backend computes on this thread alone (the CPU one with one OpenMP thread), its
      // CPU time is the action's (DeviceEmulator).
      device_(plan.devices[static_cast<std::size_t>(program_.rank)].slowdown,
              chunks_.empty() ? kernels::cpu_backend().computes_on_calling_thread()
                              : chunks_.front()->backend().computes_on_calling_thread()),
      planned_slowdown_(plan.devices[static_cast<std::size_t>(program_.rank)].slowdown),
      host_(host),
      copies_(copies),
      state_(std::make_unique<State>()) {
  prepare_program();
}

void PipelineExecutor::prepare_program() {
  lazy_gathers_ = !plan_.sharded() || lazy_gathers_deadlock_free(plan_, *program_.lowered);
  data_uses_.assign(static_cast<std::size_t>(plan_.global_microbatches()), 0);
  for (const ComputeStep& s : program_.steps) {
    const model::StageSpec& spec = chunks_[static_cast<std::size_t>(s.action.chunk)]->spec();
    if (s.action.kind == schedule::ActionKind::F && (spec.has_embedding || spec.has_head)) {
      ++data_uses_[static_cast<std::size_t>(s.action.microbatch)];
    }
  }
  // The offload table follows the program's actions (a re-balance gives another program).
  offload_.reset();
  if (mode_ == ExecutorMode::kTrain) {
    std::vector<bool> chunk_offloads;
    for (std::int32_t v : plan_.schedule.layout.rank_vstages[static_cast<std::size_t>(program_.rank)]) {
      chunk_offloads.push_back(plan_.offloads_activations(v));
    }
    if (std::find(chunk_offloads.begin(), chunk_offloads.end(), true) != chunk_offloads.end()) {
      if (host_ == nullptr || copies_ == nullptr) {
        throw Error("rank " + std::to_string(program_.rank) +
                    ": a stage that offloads its activations needs the rank's host memory tier and copy engine");
      }
      offload_ = std::make_unique<ActivationOffload>(program_, chunks_, chunk_offloads, plan_.partition.count(),
                                                     *host_, *copies_);
    }
  }
}

void PipelineExecutor::set_program(RankProgram program) {
  if (program.rank != program_.rank) {
    throw Error("pipeline executor: a program of rank " + std::to_string(program.rank) + " given to rank " +
                std::to_string(program_.rank));
  }
  program_ = std::move(program);
  prepare_program();
}

PipelineExecutor::~PipelineExecutor() = default;

std::string PipelineExecutor::action_text(const schedule::Action& a) const {
  return schedule::to_string(a, plan_.schedule.layout.max_chunks() > 1);
}

const PipelineExecutor::MicrobatchData& PipelineExecutor::data_for(std::int64_t step, int mb,
                                                                   const data::BatchSource& batches) {
  auto [it, fresh] = state_->data.try_emplace(mb);
  if (fresh) {
    // Micro-batch g of step s is sample block (s, g) of the loader, on whichever rank runs it.
    const std::size_t n = static_cast<std::size_t>(plan_.microbatch_size) * plan_.seq;
    it->second.inputs.resize(n);
    it->second.targets.resize(n);
    batches.fill(step, mb, it->second.inputs.data(), it->second.targets.data());
    it->second.uses_left = data_uses_[static_cast<std::size_t>(mb)];
  }
  return it->second;
}

spec::Segment PipelineExecutor::segment_of(int mb, int segment) {
  if (!plan_.document_cuts) return plan_.segment(segment);
  auto it = state_->cuts.find(mb);
  if (it == state_->cuts.end()) {
    it = state_->cuts.emplace(mb, microbatch_partition(plan_, state_->batches->documents(state_->step, mb))).first;
  }
  return it->second.segment(segment);
}

std::int64_t PipelineExecutor::message_elements(int mb, int segment) {
  // batch * segment length * hidden; under TP a rank's input and output are its sequence slice,
  // 1/t of that with t the rank's degree (the pieces of other degrees: runtime/reshard.h).
  return segment_elements(mb, segment) / plan_.tensor_parallel(program_.rank);
}

std::int64_t PipelineExecutor::segment_elements(int mb, int segment) {
  return std::int64_t{plan_.microbatch_size} * plan_.model.hidden * segment_of(mb, segment).length;
}

void PipelineExecutor::release_data(int mb) {
  auto it = state_->data.find(mb);
  if (it != state_->data.end() && --it->second.uses_left <= 0) state_->data.erase(it);
}

void PipelineExecutor::poll() {
  auto& sending = state_->sending;
  for (std::size_t i = 0; i < sending.size();) {
    if (sending[i].request.test()) {
      if (state_->result) state_->result->times.send_seconds += monotonic_seconds() - sending[i].posted_at;
      if (state_->record && sending[i].event != static_cast<std::size_t>(-1)) {
        state_->result->events[sending[i].event].end = monotonic_seconds() - state_->start;
      }
      sending[i] = std::move(sending.back());
      sending.pop_back();
    } else {
      ++i;
    }
  }
  dp_.poll();
}

void PipelineExecutor::post(std::int32_t id) {
  const schedule::Message& m = program_.lowered->messages[static_cast<std::size_t>(id)];
  Posted p;
  const DType dtype = message_dtype();
  const schedule::MessageKey key = program_.lowered->key(m);
  p.buffer = pool_.acquire(MemoryCategory::kCommBuffers,
                           static_cast<std::size_t>(message_elements(key.microbatch, key.segment)), dtype);
  // The sender's stage may have another TP degree: its pieces of this rank's slice, each from
  // the TP rank that holds it, received in place (runtime/reshard.h).
  const int t = plan_.tensor_parallel(program_.rank);
  for (const ReshardPiece& piece : reshard_pieces(segment_elements(key.microbatch, key.segment), t, tp_rank_,
                                                  plan_.tensor_parallel(m.src_rank))) {
    const int from = plan_.job_rank(m.src_rank, piece.peer);
    const auto at = static_cast<std::size_t>(piece.offset), n = static_cast<std::size_t>(piece.count);
    p.request.requests.push_back(
        dtype == DType::bf16
            ? world_.irecv(std::span<bf16>(p.buffer.as<bf16>() + at, n), from, static_cast<int>(m.tag))
            : world_.irecv(std::span<float>(p.buffer.data() + at, n), from, static_cast<int>(m.tag)));
  }
  state_->posted.emplace(id, std::move(p));
}

model::PooledBuffer PipelineExecutor::take_input(const ComputeStep& s) {
  if (s.input_message >= 0) {
    if (!state_->posted.contains(s.input_message)) post(s.input_message);
    auto it = state_->posted.find(s.input_message);
    // Waiting keeps the rank's own sends, reductions, gathers and copies moving (OpenMPI
    // advances collectives only inside MPI calls; a reduced chunk's host copy and early update
    // are this rank's to start).
    if (!it->second.request.test()) {
      note_waiting(it->second.request.pending().describe());  // for the stall watchdog, as Request::wait
      const double waited_from = monotonic_seconds();
      comm::Backoff backoff(it->second.request.pending().backoff_policy());
      do {
        poll();
        backoff.pause();
      } while (!it->second.request.test());
      if (state_->result) state_->result->times.recv_wait_seconds += monotonic_seconds() - waited_from;
      note_wait_over();
    }
    model::PooledBuffer buffer = std::move(it->second.buffer);
    state_->posted.erase(it);
    return buffer;
  }
  if (s.input_local >= 0) {
    auto it = state_->local.find(s.input_local);
    if (it == state_->local.end()) {
      throw Error("rank " + std::to_string(program_.rank) + ": " +
                  action_text(s.action) +
                  " needs a local input that no earlier action produced (invalid schedule)");
    }
    model::PooledBuffer buffer = std::move(it->second);
    state_->local.erase(it);
    return buffer;
  }
  return {};
}

double PipelineExecutor::compute(std::int64_t step, const ComputeStep& s,
                                 const data::BatchSource& batches, ConstTypedPtr input,
                                 TypedPtr output, double loss_scale) {
  const schedule::Action& a = s.action;
  model::StageModel& m = *chunks_[static_cast<std::size_t>(a.chunk)];
  const spec::Segment seg = segment_of(a.microbatch, a.segment);
  const int rows = plan_.microbatch_size, seq = plan_.seq;
  State& st = *state_;
  switch (a.kind) {
    case schedule::ActionKind::F: {
      const model::StageSpec& spec = m.spec();
      if (a.segment == 0) {
        // Every stage masks attention to the documents of the micro-batch's rows (a pure
        // function of the data: each rank reads them itself).
        std::vector<std::int32_t> documents = data::document_mask(batches.documents(step, a.microbatch), seq);
        if (!documents.empty()) m.set_documents(a.microbatch, std::move(documents), seq);
      }
      const std::int32_t* tokens = nullptr;
      const std::int32_t* targets = nullptr;
      if (spec.has_embedding || spec.has_head) {
        const MicrobatchData& d = data_for(step, a.microbatch, batches);
        if (spec.has_embedding) {
          data::segment_columns(d.inputs, rows, seq, seg.start, seg.length, st.seg_tokens);
          tokens = st.seg_tokens.data();
        }
        if (spec.has_head) {
          data::segment_columns(d.targets, rows, seq, seg.start, seg.length, st.seg_targets);
          targets = st.seg_targets.data();
        }
      }
      double loss = 0;
      if (spec.has_head) {
        // Every unit's loss is scaled by 1 / (tokens in the global batch), so the units' returns
        // over all ranks add up to the global mean (parallel contract).
        loss = m.forward_loss(a.microbatch, rows, seg, input, tokens, targets, loss_scale);
      } else {
        m.forward(a.microbatch, rows, seg, input, tokens, output);
      }
      if (spec.has_embedding || spec.has_head) release_data(a.microbatch);
      // Evaluation keeps nothing for a backward: the micro-batch's activations and K/V go once
      // its last segment has passed this chunk (earlier segments' K/V serve the later ones).
      if (mode_ == ExecutorMode::kEvaluate &&
          a.segment + 1 == plan_.partition.count()) {
        m.discard(a.microbatch);
      }
      return loss;
    }
    case schedule::ActionKind::B:
      m.backward_input(a.microbatch, seg, input, output);
      return 0;
    case schedule::ActionKind::BW:
      m.backward(a.microbatch, seg, input, output);
      return 0;
    case schedule::ActionKind::W:
      m.backward_weight(a.microbatch, seg);
      return 0;
  }
  return 0;
}

void PipelineExecutor::apply_injected_slowdown(std::int64_t step, const FailureInjection& failure) {
  if (mode_ == ExecutorMode::kEvaluate) return;
  if (const FailureInjection::Point* l = failure.find(world_.rank(), step, FailureInjection::Kind::kLink)) {
    link_.set(l->bytes_per_second, l->latency_seconds);
    char what[96];
    if (link_.active()) {
      std::snprintf(what, sizeof what, "%g B/s, latency %g s", link_.bytes_per_second(), link_.latency_seconds());
    } else {
      std::snprintf(what, sizeof what, "back to the host's");
    }
    std::fprintf(stderr, "plait: rank %d: step %lld: emulated link of its sends %s (injected)\n", world_.rank(),
                 static_cast<long long>(step), what);
    std::fflush(stderr);
  }
  const FailureInjection::Point* p = failure.find(world_.rank(), step, FailureInjection::Kind::kSlow);
  if (!p) return;
  const double before = device_.slowdown();
  device_.set_slowdown(planned_slowdown_ * p->factor);
  std::fprintf(stderr, "plait: rank %d: step %lld: emulated slow-down %g -> %g (injected)\n", world_.rank(),
               static_cast<long long>(step), before, device_.slowdown());
  std::fflush(stderr);
}

ExecutedStep PipelineExecutor::run(std::int64_t step, const data::BatchSource& batches,
                                   double start, bool record_events,
                                   const FailureInjection& failure, double loss_scale) {
  using Kind = FailureInjection::Kind;
  ExecutedStep result;
  State& st = *state_;
  st.result = &result;
  st.record = record_events;
  st.start = start;
  st.batches = &batches;
  st.step = step;
  st.cuts.clear();
  const int rank = program_.rank;
  // Failures are injected by MPI rank (FailureInjection): with tensor parallelism one process of
  // its schedule rank's group.
  const int job_rank = world_.rank();
  const std::size_t fail_at = program_.steps.size() / 2;
  const auto poll_fn = [this] { poll(); };
  // The mean over the targets that count in the global batch (every rank counts the same from
  // the data: data/document_mask.h), the plan's tokens unless sequences are packed with padding.
  if (loss_scale == 0) {
    loss_scale = 1.0 / static_cast<double>(data::counted_targets(batches, step, plan_.global_microbatches()));
  }
  bool nan_loss = failure.at(job_rank, step, Kind::kNanLoss);
  bool nan_gradient = failure.at(job_rank, step, Kind::kNanGradient);
  apply_injected_slowdown(step, failure);
  std::vector<bool> ran(chunks_.size() * kUnitKinds, false);  // by (chunk, kind): ran this step

  char doing[96];
  for (std::size_t i = 0; i < program_.steps.size(); ++i) {
    const ComputeStep& s = program_.steps[i];
    // For the stall watchdog: where this rank is (and, while it waits, for what).
    std::snprintf(doing, sizeof doing, "step %lld%s: %s on stage %d", static_cast<long long>(step),
                  mode_ == ExecutorMode::kEvaluate ? " (validation)" : "", action_text(s.action).c_str(), s.vstage);
    note_progress(doing);
    if (i == fail_at && failure.at(job_rank, step, Kind::kKill)) {
      kill_self(job_rank, step, mode_ == ExecutorMode::kEvaluate ? "during evaluation" : "mid-step");
    }
    if (i == fail_at && failure.at(job_rank, step, Kind::kStop)) stop_self(job_rank, step);
    if (i == fail_at && failure.at(job_rank, step, Kind::kHang)) hang_self(job_rank, step);
    if (i == fail_at && failure.at(job_rank, step, Kind::kSigterm)) signal_self(job_rank, step, SIGTERM);
    if (i == fail_at && failure.at(job_rank, step, Kind::kSigusr1)) signal_self(job_rank, step, SIGUSR1);
    if (i == fail_at && failure.at(job_rank, step, Kind::kThrow)) {
      throw Error("step " + std::to_string(step) + ": injected failure before action " +
                  std::to_string(i) + " (" + action_text(s.action) + ")");
    }
    poll();
    for (std::int32_t id : program_.posts[i]) {
      if (!st.posted.contains(id)) post(id);
    }
    if (lazy_gathers_) {
      for (std::int32_t c : s.prefetch) dp_.prefetch(c);
    } else if (i == 0) {
      for (std::size_t c = 0; c < chunks_.size(); ++c) dp_.prefetch(static_cast<int>(c));
    }
    model::PooledBuffer input = take_input(s);
    dp_.before_compute(s);
    model::PooledBuffer output;
    if (s.output_elements > 0) {
      output = pool_.acquire(MemoryCategory::kCommBuffers,
                             static_cast<std::size_t>(message_elements(s.action.microbatch, s.action.segment)),
                             message_dtype());
    }

    const schedule::Action& a = s.action;
    if (offload_) {
      // The copies out due finish and the copies back due start before the action; a B waits
      // for its own (runtime/activation_offload.h).
      offload_->before(i);
    }
    // The stage's TP collectives during the action go over the link, which an emulated device
    // does not slow (DeviceEmulator).
    const auto* tp_group =
        dynamic_cast<const CommTensorParallelGroup*>(chunks_[static_cast<std::size_t>(a.chunk)]->tensor_parallel_group());
    const double link0 = tp_group ? tp_group->link_seconds() : 0.0;
    const double paused0 = tp_group ? tp_group->paused_seconds() : 0.0;
    const double t0 = monotonic_seconds();
    const double cpu0 = thread_cpu_seconds();
    try {
      double loss = compute(step, s, batches, typed(input), typed(output), loss_scale);
      if (nan_loss && chunks_[static_cast<std::size_t>(a.chunk)]->spec().has_head &&
          a.kind == schedule::ActionKind::F) {
        loss = std::numeric_limits<double>::quiet_NaN();
        nan_loss = false;
      }
      result.loss += loss;
    } catch (const std::exception& e) {
      // Where it happened: the step, the action and the stage (e.g. an emulated device's
      // memory running out in the middle of a step).
      throw Error("step " + std::to_string(step) + ", " +
                  action_text(a) + " on stage " +
                  std::to_string(s.vstage) + ": " + e.what());
    }
    const double t1 = monotonic_seconds();
    // The CPU time of the action less its TP collectives' pauses while waiting for a partner
    // (CommTensorParallelGroup::paused_seconds): a device does not compute while it waits.
    const double cpu = thread_cpu_seconds() - cpu0 - (tp_group ? tp_group->paused_seconds() - paused0 : 0.0);
    const double link = tp_group ? tp_group->link_seconds() - link0 : 0.0;
    device_.pad(t0, t1, cpu, poll_fn, link);
    const double t2 = monotonic_seconds();
    if (offload_) offload_->after(i);
    result.busy_seconds += t2 - t0;
    // The device's time for the action, not the wall time: the wall time of an unslowed rank
    // also holds its waits for a core it shares with other emulated ranks (DeviceEmulator).
    const std::size_t kind = unit_kind_index(a.kind);
    const double device_seconds = device_.padded_end(t0, t1, cpu, link) - t0;
    result.times.compute_seconds[kind] += device_seconds;
    result.times.units[kind] += 1;
    const std::size_t first = static_cast<std::size_t>(a.chunk) * kUnitKinds + kind;
    if (!ran[first]) {  // (RankStepTimes::first_seconds: it ran cold)
      ran[first] = true;
      result.times.first_seconds += device_seconds;
      result.times.first_units += 1;
    }
    result.finish_seconds = t2 - start;
    if (record_events) {
      trace::Event e;
      e.rank = rank;
      e.kind = trace::event_kind(a.kind);
      e.microbatch = a.microbatch;
      e.segment = a.segment;
      e.chunk = a.chunk;
      e.start = t0 - start;
      e.end = t2 - start;
      result.events.push_back(e);
    }
    input.reset();

    if (s.output_message >= 0) {
      const schedule::Message& msg = program_.lowered->messages[static_cast<std::size_t>(s.output_message)];
      // This micro-batch's segment's bytes (its own cut with work-aware segments).
      const auto bytes = static_cast<std::int64_t>(output.size() * dtype_size(output.dtype()));
      // An injected link fault holds the sender for the message's time on the slow link.
      const double held = link_.delay(static_cast<std::size_t>(bytes));
      result.times.send_seconds += held;
      Sending out;
      // The receiver's stage may have another TP degree: this rank's slice in its pieces, each
      // to the TP rank that holds it (runtime/reshard.h).
      const int t = plan_.tensor_parallel(program_.rank);
      for (const ReshardPiece& piece :
           reshard_pieces(segment_elements(a.microbatch, a.segment), t, tp_rank_, plan_.tensor_parallel(msg.dst_rank))) {
        const int to = plan_.job_rank(msg.dst_rank, piece.peer);
        const auto at = static_cast<std::size_t>(piece.offset), n = static_cast<std::size_t>(piece.count);
        out.request.requests.push_back(
            output.dtype() == DType::bf16
                ? world_.isend(std::span<const bf16>(output.as<bf16>() + at, n), to, static_cast<int>(msg.tag))
                : world_.isend(std::span<const float>(output.data() + at, n), to, static_cast<int>(msg.tag)));
      }
      out.buffer = std::move(output);
      out.event = static_cast<std::size_t>(-1);
      out.posted_at = monotonic_seconds();
      result.times.sent_bytes += static_cast<double>(bytes);
      if (record_events) {
        trace::Event e;
        e.rank = rank;
        e.kind = trace::EventKind::send;
        e.microbatch = a.microbatch;
        e.segment = a.segment;
        e.chunk = a.chunk;
        e.start = e.end = t2 - start;
        e.peer = msg.dst_rank;
        e.bytes = bytes;
        e.gradient = schedule::is_backward_input(a.kind);
        out.event = result.events.size();
        result.events.push_back(e);
      }
      st.sending.push_back(std::move(out));
    } else if (s.output_local >= 0) {
      st.local.emplace(s.output_local, std::move(output));
    }
    if (s.finishes_chunk && nan_gradient) {
      // As if the backward had overflowed: before the reduction, so it spreads as a real one.
      model::StageModel& m = *chunks_[static_cast<std::size_t>(a.chunk)];
      m.gradients()[m.tensors().front().offset] = std::numeric_limits<float>::quiet_NaN();
      nan_gradient = false;
    }
    dp_.after_compute(s);
  }

  // Every send must complete before its buffer goes; keep the reductions moving meanwhile.
  std::snprintf(doing, sizeof doing, "step %lld%s: after its last action, finishing its sends",
                static_cast<long long>(step), mode_ == ExecutorMode::kEvaluate ? " (validation)" : "");
  note_progress(doing);
  for (poll(); !st.sending.empty(); poll()) st.sending.front().request.wait();
  if (!st.posted.empty() || !st.local.empty()) {
    throw Error("rank " + std::to_string(rank) + ": step " + std::to_string(step) + " ended with " +
                std::to_string(st.posted.size()) + " receives and " +
                std::to_string(st.local.size()) + " local hand-offs unused (invalid schedule)");
  }
  st.data.clear();
  st.cuts.clear();
  st.result = nullptr;
  return result;
}

}  // namespace plait::runtime
