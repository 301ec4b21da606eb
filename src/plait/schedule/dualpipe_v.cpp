// DualPipeV (DeepSeek, DualPipe, github.com/deepseek-ai/DualPipe, dualpipev.py; the V form of
// DualPipe, DeepSeek-V3 technical report arXiv 2412.19437 sec. 3.2.1; torch.distributed.pipelining's
// ScheduleDualPipeV): the V placement (chunk 0 of rank r is virtual stage r, chunk 1 is 2p-1-r)
// in eight phases per rank r of p, for m >= 2p micro-batches:
//   1. 2(p-r-1) forwards of chunk 0;            2. r+1 times: F chunk 0, F chunk 1;
//   3. p-r-1 times: B, W chunk 1, F chunk 1;     4. m-2p+r+1 times: F0 + B1, F1 + B0 (pairs);
//   5. p-r-1 times: B chunk 1, then F1 + B0;     6. r+1 times: B chunk 1, B chunk 0;
//   7. p-r-1 times: a deferred W, B chunk 0;     8. r+1 deferred W's.
// Backwards are full (B then its W) except where the reference defers W (zero bubble): step 3
// (its W runs at once), the second half of step 6 (from the (r+1)/2-th pair, on the chunk-1
// backward for odd r and the chunk-0 one for even r) and step 7; deferred W's run oldest first.
// Each chunk runs its micro-batches in order. The pairs "F + B" are what DualPipe overlaps on a GPU
// (one chunk's forward with another's backward, hiding each other's communication); on CPU ranks
// they are two actions in that order. The simulator can model the overlap as an option
// (SimOptions::overlap_pairs; unvalidated until a GPU backend runs it).
// Peak: 2p + 1 chunk units (p + 1/2 micro-batches) on every rank: 2p after step 2, one more at
// each pair's forward.
#include <deque>

#include "plait/schedule/generators.h"
#include "plait/schedule/layout.h"

namespace plait::schedule {

namespace {

// One rank's action list, with a counter per chunk for the next forward and backward.
class DualPipeVRank {
 public:
  std::vector<Action> actions;

  void forward(int chunk) { actions.push_back({ActionKind::F, next_f_[chunk]++, 0, chunk}); }
  // A backward whose W runs at once (full), or waits in the queue (zero bubble).
  void backward(int chunk, bool defer_w) {
    const int mb = next_b_[chunk]++;
    actions.push_back({ActionKind::B, mb, 0, chunk});
    const Action w{ActionKind::W, mb, 0, chunk};
    if (defer_w) {
      deferred_.push_back(w);
    } else {
      actions.push_back(w);
    }
  }
  void weight() {
    actions.push_back(deferred_.front());
    deferred_.pop_front();
  }

 private:
  int next_f_[2] = {0, 0}, next_b_[2] = {0, 0};
  std::deque<Action> deferred_;
};

std::vector<Action> dualpipe_v_rank(int p, int m, int r) {
  DualPipeVRank rank;
  for (int i = 0; i < 2 * (p - r - 1); ++i) rank.forward(0);
  for (int i = 0; i < r + 1; ++i) rank.forward(0), rank.forward(1);
  for (int i = 0; i < p - r - 1; ++i) {
    rank.backward(1, true);
    rank.weight();
    rank.forward(1);
  }
  for (int i = 0; i < m - 2 * p + r + 1; ++i) {
    rank.forward(0), rank.backward(1, false);  // the last rank's first pair is not overlapped
    rank.forward(1), rank.backward(0, false);
  }
  for (int i = 0; i < p - r - 1; ++i) {
    rank.backward(1, false);
    rank.forward(1), rank.backward(0, false);
  }
  bool zero_bubble = false;
  for (int i = 0; i < r + 1; ++i) {
    if (i == (r + 1) / 2 && r % 2 == 1) zero_bubble = true;
    rank.backward(1, zero_bubble);
    if (i == (r + 1) / 2 && r % 2 == 0) zero_bubble = true;
    rank.backward(0, zero_bubble);
  }
  for (int i = 0; i < p - r - 1; ++i) {
    rank.weight();
    rank.backward(0, true);
  }
  for (int i = 0; i < r + 1; ++i) rank.weight();
  return rank.actions;
}

Schedule generate_dualpipe_v(const PipelineShape& shape) {
  Schedule schedule = empty_schedule(v_shape_layout(shape.stages, shape.microbatches, 1));
  for (int r = 0; r < shape.stages; ++r) schedule.ranks[r] = dualpipe_v_rank(shape.stages, shape.microbatches, r);
  return schedule;
}

int dualpipe_v_in_flight(const PipelineShape& shape, int /*rank*/) { return 2 * shape.stages + 1; }

std::string dualpipe_v_unsupported(const PipelineShape& shape) {
  if (shape.microbatches >= 2 * shape.stages) return {};
  return "needs m >= 2p micro-batches (its steady phase runs m - 2p + r + 1 pairs on rank r); got m = " +
         std::to_string(shape.microbatches) + " for p = " + std::to_string(shape.stages);
}

}  // namespace

ScheduleFamily dualpipe_v_family() {
  return {
      .name = "dualpipe-v",
      .title = "DualPipeV (DeepSeek DualPipe, V form)",
      .source = "DeepSeek, DualPipe (dualpipev.py); DeepSeek-V3 report arXiv 2412.19437 sec. 3.2.1",
      .fixed_chunks = 2,
      .split_backward = true,
      .placement = StagePlacement::v_shape,
      .in_flight_limit = dualpipe_v_in_flight,
      .overlapped_pairs = true,
      .own_simulation_slots = true,
      .unsupported = dualpipe_v_unsupported,
      .generate = generate_dualpipe_v,
  };
}

}  // namespace plait::schedule
