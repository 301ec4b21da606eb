#pragma once
// Runs one rank's part of a training step: walks its compute actions in order (RankProgram),
// and for each one posts the receives due (a window of `recv_lookahead` actions, lowering's
// Message::post_op), starts the level-3 weight gathers due (ShardedDataParallel::prefetch), waits
// for its input and its chunk's weights, runs the stage model (F, B, W or BW of a micro-batch
// segment on one of its chunks), pads the action for an emulated slower device, and hands the
// output on: a nonblocking send, or a local hand-off to its own next chunk. Sends complete
// lazily (tested between actions; all waited for at the end of the step), so a rank never blocks
// on a send, which is the validator's "receives posted ahead" semantics whatever the window.
//
// It contains no schedule-family logic: the order, the placement and the B/W split all come from
// the action list. Memory: a unit's activations and K/V live in the StageModel (freed by its last
// use, model/stage_model.h); receive and send buffers and local hand-offs are comm_buffers,
// released as soon as the consuming action has run or the send has completed.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "plait/comm/communicator.h"
#include "plait/data/batch_source.h"
#include "plait/model/stage_model.h"
#include "plait/model/tensor_pool.h"
#include "plait/runtime/activation_offload.h"
#include "plait/runtime/device_emulator.h"
#include "plait/runtime/link_emulator.h"
#include "plait/runtime/failure_injection.h"
#include "plait/runtime/sharded_data_parallel.h"
#include "plait/runtime/rank_program.h"
#include "plait/runtime/rank_step_times.h"
#include "plait/trace/event.h"

namespace plait::runtime {

// Training runs every action of the schedule; evaluation runs a forward-only program (the F
// actions of each rank, in order: forward_only_schedule) and drops each micro-batch's state on a
// chunk after its last segment's forward, so nothing is kept for a backward.
enum class ExecutorMode { kTrain, kEvaluate };

struct ExecutedStep {
  double loss = 0;             // sum of this rank's units' scaled losses
  double busy_seconds = 0;     // compute time including emulation padding
  double finish_seconds = 0;   // end of the last compute action, from the step start
  RankStepTimes times;         // compute per unit kind, receive waits, sends (the barrier and
                               // reductions' waits are the trainer's to add)
  std::vector<trace::Event> events;  // compute actions and sends, times from the step start
};

class PipelineExecutor {
 public:
  // chunks[c]: the model of the rank's chunk c; buffers: the tracker charged for comm buffers.
  // `world` holds the job's ranks (every schedule rank's TP group: PipelinePlan::job_rank);
  // program.rank is this rank's schedule rank.
  // host, copies: the rank's host tier and copy engine, required in training when one of its
  // stages offloads its activations (plan.offloads_activations; runtime/activation_offload.h).
  PipelineExecutor(const PipelinePlan& plan, RankProgram program, comm::Communicator& world,
                   std::vector<model::StageModel*> chunks, ShardedDataParallel& data_parallel,
                   MemoryTracker& buffers, ExecutorMode mode = ExecutorMode::kTrain,
                   MemoryTracker* host = nullptr, CopyEngine* copies = nullptr);
  ~PipelineExecutor();
  PipelineExecutor(const PipelineExecutor&) = delete;
  PipelineExecutor& operator=(const PipelineExecutor&) = delete;

  // Runs the rank's actions of step `step`; `start` is the step's time origin (monotonic
  // seconds, taken after the step's barrier). Returns once every action has run and every send
  // has completed; gradient reductions may still be in flight (ShardedDataParallel::finish).
  // Each head-stage unit's loss is scaled by loss_scale (0: 1 / the targets that count in the
  // global batch, data::counted_targets, so the units of all ranks add up to the step's mean
  // loss). A micro-batch packed from documents has its document mask set on every chunk before
  // its first forward (StageModel::set_documents). `failure` acts when its step is `step`:
  // throw or kill before the middle action, a NaN unit loss, a NaN gradient; a slow-down
  // (Kind::kSlow) changes the emulated device's speed from this step on.
  ExecutedStep run(std::int64_t step, const data::BatchSource& batches, double start,
                   bool record_events, const FailureInjection& failure = {},
                   double loss_scale = 0);

  const RankProgram& program() const { return program_; }
  // Runs `program` from the next run on: the same rank, chunks and plan's layout, another action
  // list (a re-balance, share_rebalancer.h; the plan the executor refers to holds its schedule).
  // The emulated device keeps its speed. Between runs only.
  void set_program(RankProgram program);
  // The emulated device's slow-down and the emulated link of the rank's sends as injected so
  // far (FailureInjection kSlow, kLink), so that a rebuilt trainer (a layer move,
  // runtime/layer_transfer.h) keeps them.
  double device_slowdown() const { return device_.slowdown(); }
  void set_device_slowdown(double slowdown) { device_.set_slowdown(slowdown); }
  LinkEmulator& link() { return link_; }
  // The rank's activation offload (null when none of its stages offloads in training).
  const ActivationOffload* activation_offload() const { return offload_.get(); }

 private:
  struct MicrobatchData;
  struct Posted;
  struct Sending;
  // What the program implies: each micro-batch's data uses and whether level-3 gathers may be lazy.
  void prepare_program();
  // Sets the emulated slow-down when `failure` changes it at `step` (FailureInjection::kSlow),
  // and the emulated link of the rank's sends (kLink).
  void apply_injected_slowdown(std::int64_t step, const FailureInjection& failure);
  const MicrobatchData& data_for(std::int64_t step, int microbatch, const data::BatchSource& batches);
  void release_data(int microbatch);
  // Segment `segment` of micro-batch `microbatch` in the step under way: the plan's, or its own
  // work-aware cut (microbatch_partition.h); and the elements of its stage messages.
  spec::Segment segment_of(int microbatch, int segment);
  std::int64_t message_elements(int microbatch, int segment);
  // The whole segment's elements (batch * length * hidden), which TP ranks hold 1/t of.
  std::int64_t segment_elements(int microbatch, int segment);
  void poll();
  void post(std::int32_t message);
  model::PooledBuffer take_input(const ComputeStep& s);
  // "F3.1" (with "c<chunk>" when some rank holds several chunks), for messages.
  std::string action_text(const schedule::Action& a) const;
  // Runs one compute action on its chunk's model; returns its scaled loss (head stage F) or 0.
  double compute(std::int64_t step, const ComputeStep& s, const data::BatchSource& batches,
                 ConstTypedPtr input, TypedPtr output, double loss_scale);
  // The element type of stage messages (spec/precision_policy.h).
  DType message_dtype() const;

  const PipelinePlan& plan_;
  RankProgram program_;
  comm::Communicator& world_;  // the job's ranks (PipelinePlan::job_rank)
  int tp_rank_;                 // this rank's TP rank in its schedule rank's group
  std::vector<model::StageModel*> chunks_;
  ShardedDataParallel& dp_;
  // Level-3 gathers start one action before each chunk's first use (lazy), or all at the step's
  // start when that could deadlock (lazy_gathers_deadlock_free).
  bool lazy_gathers_ = true;
  ExecutorMode mode_;
  model::TensorPool pool_;  // comm_buffers
  DeviceEmulator device_;
  double planned_slowdown_;  // the plan's, which an injected slow-down multiplies
  LinkEmulator link_;        // off unless a link fault is injected
  MemoryTracker* host_;      // the rank's host tier and copy engine (activation offload), or null
  CopyEngine* copies_;
  // Per micro-batch: how many of this rank's forwards read its tokens or targets.
  std::vector<int> data_uses_;
  struct State;
  std::unique_ptr<State> state_;
  std::unique_ptr<ActivationOffload> offload_;
};

}  // namespace plait::runtime
