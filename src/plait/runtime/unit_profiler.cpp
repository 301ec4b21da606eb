#include "plait/runtime/unit_profiler.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "plait/core/median.h"
#include "plait/core/memory_tracker.h"
#include "plait/core/monotonic_clock.h"
#include "plait/core/thread_cpu_clock.h"
#include "plait/model/stage_model.h"

namespace plait::runtime {
namespace {

enum class Probe { layers, embedding, head };

// Rank `rank` of a TP group of `size` that moves no data, so a probe times one rank's compute of
// a TP stage without its collectives (the link's: the cost model adds them). A gather fills the
// other ranks' blocks with copies of this rank's (finite values of the right scale, written as a
// real gather writes them); a reduce-scatter and the all-reduces keep this rank's own values.
class StandInGroup : public model::TensorParallelGroup {
 public:
  StandInGroup(int size, int rank) : size_(size), rank_(rank) {}
  int size() const override { return size_; }
  int rank() const override { return rank_; }
  void all_gather(TypedPtr data, std::size_t block) override {
    if (data.dtype == DType::bf16) {
      fill_from_own(data.as<bf16>(), block);
    } else {
      fill_from_own(data.as<float>(), block);
    }
  }
  void reduce_scatter(float*, std::size_t) override {}
  void all_reduce_sum(float*, std::size_t) override {}
  void all_reduce_sum(double*, std::size_t) override {}
  void all_reduce_max(float*, std::size_t) override {}

 private:
  template <typename T>
  void fill_from_own(T* data, std::size_t block) const {
    const T* own = data + static_cast<std::size_t>(rank_) * block;
    for (int r = 0; r < size_; ++r) {
      if (r != rank_) std::copy(own, own + block, data + static_cast<std::size_t>(r) * block);
    }
  }
  int size_, rank_;
};

// `rows` activations of a stage (rows x hidden) in its activation type, host memory the CPU
// backend reads directly.
class ActivationBuffers {
 public:
  ActivationBuffers(const model::StageModel& stage, std::size_t rows)
      : dtype_(stage.activation_dtype()), count_(rows * static_cast<std::size_t>(stage.config().hidden)) {
    if (dtype_ == DType::bf16) {
      bf16_.resize(count_);
    } else {
      f32_.resize(count_);
    }
  }
  template <typename Draw>
  void fill(Draw draw) {
    for (std::size_t i = 0; i < count_; ++i) {
      if (dtype_ == DType::bf16) {
        bf16_[i] = bf16(draw());
      } else {
        f32_[i] = draw();
      }
    }
  }
  TypedPtr data() { return dtype_ == DType::bf16 ? TypedPtr(bf16_.data()) : TypedPtr(f32_.data()); }

 private:
  DType dtype_;
  std::size_t count_;
  std::vector<float> f32_;
  std::vector<bf16> bf16_;
};

// Times F, B and W of every segment of a stage of the given kind, `repeats` times after a
// warm-up, and returns the medians per segment (divided by the probe's layer count).
std::vector<UnitTimes> time_stage(const spec::ModelSpec& config, Probe probe, int layers, int batch,
                                  const spec::SequencePartition& partition,
                                  const ProfileOptions& options, bool recompute = false) {
  const int repeats = options.repeats;
  model::StageSpec spec;
  if (probe == Probe::layers) spec = {0, layers, false, false, recompute ? layers : 0};
  if (probe == Probe::embedding) spec = {0, 0, true, false};
  if (probe == Probe::head) spec = {config.layers, config.layers, false, true};
  spec.precision = options.precision;
  spec.tensor_parallel = options.tensor_parallel;
  spec.tp_rank = options.tp_rank;
  MemoryTracker tracker;
  StandInGroup group(options.tensor_parallel, options.tp_rank);
  model::StageModel stage(config, spec, tracker, kernels::cpu_backend(),
                          options.tensor_parallel > 1 ? &group : nullptr);
  stage.init_parameters(1);

  std::vector<spec::Segment> segments;
  for (int i = 0; i < partition.count(); ++i) segments.push_back(partition.segment(i));
  const int seq = static_cast<int>(partition.seq());
  const std::size_t rows = static_cast<std::size_t>(batch) * seq;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> token(0, config.vocab - 1);
  // The stage's activations and their gradients in its activation type (bf16 in bf16 runs).
  ActivationBuffers in(stage, rows), out(stage, rows), grad(stage, rows), grad_in(stage, rows);
  in.fill([&] { return normal(rng); });
  grad.fill([&] { return 1e-3f * normal(rng); });
  std::vector<std::int32_t> tokens(rows), targets(rows);
  for (auto& t : tokens) t = token(rng);
  for (auto& t : targets) t = token(rng);

  const std::size_t k = segments.size();
  std::vector<std::vector<double>> f(k), b(k), w(k);
  // Micro-batch r's forwards run before micro-batch r - lag's backwards, so `in_flight`
  // micro-batches are held at once and a unit's backward finds its activations as far out of
  // the caches as in a pipeline's steady state (1F1B holds 2 on its last stage, more earlier).
  // Micro-batch 0 is the warm-up and not timed.
  const int lag = std::max(1, options.in_flight) - 1;
  // An emulated device of slow-down s sleeps (s - 1) times each unit's duration after it
  // (DeviceEmulator::pad); idling alike makes every unit start as cold as it will there.
  bool timed_pass = false;
  const auto timed = [&](std::vector<double>& into, bool keep, const auto& unit) {
    const double t0 = monotonic_seconds(), cpu0 = thread_cpu_seconds();
    unit();
    const double wall = monotonic_seconds() - t0;
    const double seconds = options.cpu_time ? std::min(wall, thread_cpu_seconds() - cpu0) : wall;
    if (keep && timed_pass) into.push_back(seconds);
    if (options.slowdown > 1) {
      std::this_thread::sleep_for(std::chrono::duration<double>((options.slowdown - 1) * seconds));
    }
  };
  const auto forward = [&](int r, std::size_t j) {
    const spec::Segment& s = segments[j];
    // Positions are what matter for the cost; the buffers fit any segment.
    timed(f[j], r > 0, [&] {
      if (probe == Probe::head) {
        stage.forward_loss(r, batch, s, in.data(), nullptr, targets.data(), 1e-3);
      } else {
        stage.forward(r, batch, s, probe == Probe::embedding ? nullptr : in.data(),
                      probe == Probe::embedding ? tokens.data() : nullptr, out.data());
      }
    });
  };
  const auto backward_input = [&](int r, std::size_t j) {
    timed(b[j], r > 0, [&] {
      stage.backward_input(r, segments[j], probe == Probe::head ? nullptr : grad.data(),
                           probe == Probe::embedding ? nullptr : grad_in.data());
    });
  };
  const auto backward_weight = [&](int r, std::size_t j) {
    timed(w[j], r > 0, [&] { stage.backward_weight(r, segments[j]); });
  };
  // defer_weight: micro-batch r's W after the next micro-batch's F and B, as zero-bubble
  // schedules run it (its inputs have left the caches by then).
  const int w_lag = lag + (options.defer_weight ? 1 : 0);
  // With micro-batches in flight (lag >= 1) the units alternate segment by segment, F of
  // micro-batch r's segment j, then B and W of an earlier micro-batch's segment k - 1 - j, as a
  // sequence-level pipeline's steady state runs them (Seq1F1B's one forward, one backward): each
  // unit finds the caches holding another micro-batch's work. Running all k forwards, then all k
  // backwards, kept a segment's neighbours warm: at k = 16 the simulated seq1f1b step came out
  // 17-19% fast (units 15-20% slower in the pipeline than profiled).
  const auto run = [&](int count) {
    for (int r = 0; r <= count + w_lag; ++r) {
      const bool fwd = r <= count, bwd = r - lag >= 0 && r - lag <= count, wgt = r - w_lag >= 0;
      if (lag == 0) {
        for (std::size_t j = 0; fwd && j < k; ++j) forward(r, j);
        for (std::size_t j = k; bwd && j-- > 0;) backward_input(r - lag, j);
        for (std::size_t j = k; wgt && j-- > 0;) backward_weight(r - w_lag, j);
        continue;
      }
      for (std::size_t j = 0; j < k; ++j) {
        if (fwd) forward(r, j);
        if (bwd) backward_input(r - lag, k - 1 - j);
        if (wgt) backward_weight(r - w_lag, k - 1 - j);
      }
    }
  };
  // An untimed pass first takes `in_flight` micro-batches through F, B and W, so the timed pass
  // finds their memory in the stage's pool, as a pipeline's steady state does (each step reuses
  // the blocks of the step before). Without it every timed F of a deep lag wrote pages touched
  // for the first time: at 8 micro-batches in flight (GPipe's profile) a layer's F measured
  // 6.98 ms against 2.90 ms at 2, and the simulated GPipe step came out 30% slow.
  run(w_lag);
  timed_pass = true;
  run(repeats);
  const double divide = probe == Probe::layers ? layers : 1;
  std::vector<UnitTimes> times(k);
  for (std::size_t j = 0; j < k; ++j) {
    times[j] = {median(f[j]) / divide, median(b[j]) / divide, median(w[j]) / divide};
  }
  return times;
}

}  // namespace

SegmentProfile profile_segments(const spec::ModelSpec& model, int microbatch_size,
                                const spec::SequencePartition& partition,
                                const ProfileOptions& options) {
  SegmentProfile p;
  p.model = model;
  p.microbatch_size = microbatch_size;
  p.tensor_parallel = options.tensor_parallel;
  p.partition = partition;
  const int layers = std::max(1, std::min(options.probe_layers, model.layers));
  p.layer = time_stage(model, Probe::layers, layers, microbatch_size, partition, options);
  if (options.recompute) {
    const std::vector<UnitTimes> rebuilt =
        time_stage(model, Probe::layers, layers, microbatch_size, partition, options, true);
    for (std::size_t j = 0; j < p.layer.size(); ++j) {
      p.layer[j].recompute = std::max(0.0, rebuilt[j].backward_input - p.layer[j].backward_input);
    }
  }
  p.embedding = time_stage(model, Probe::embedding, 0, microbatch_size, partition, options);
  p.head = time_stage(model, Probe::head, 0, microbatch_size, partition, options);
  return p;
}

BatchProfile profile_batches(const spec::ModelSpec& model, int seq, int max_batch,
                             const ProfileOptions& options) {
  BatchProfile p;
  p.seq = seq;
  const spec::SequencePartition whole = spec::even_partition(model, seq, 1);
  const int layers = std::max(1, std::min(options.probe_layers, model.layers));
  for (int b = 1; b <= max_batch; ++b) {
    p.layer.push_back(time_stage(model, Probe::layers, layers, b, whole, options)[0]);
    p.embedding.push_back(time_stage(model, Probe::embedding, 0, b, whole, options)[0]);
    p.head.push_back(time_stage(model, Probe::head, 0, b, whole, options)[0]);
  }
  return p;
}

}  // namespace plait::runtime
