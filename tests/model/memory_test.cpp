// The tracker sees exactly the bytes ::plait::spec::unit_memory() predicts, in fp32 and bf16, at every step of a unit's
// life (F, B, W, fused B+W), for stages with and without embedding and head, with none, some
// and all of their layers recomputed: the level after each call and the peak inside it, of the
// sum and of the activations and K/V categories each; the capacity error fires and leaves the
// model usable.
#include <gtest/gtest.h>

#include <omp.h>

#include "plait/core/memory_tracker.h"
#include "plait/spec/unit_memory.h"
#include "tiny_model.h"

namespace plait::model {
namespace {

using namespace plait::model::testing;

class UnitMemory : public FamilyTest {};

constexpr auto kAct = MemoryCategory::kActivations;
constexpr auto kKV = MemoryCategory::kKVCache;

// Runs one micro-batch of two segments through `spec`, checking the tracker against the
// prediction after every call.
template <typename T>
void check_stage(const spec::ModelSpec& config, StageSpec spec, bool fused) {
  spec.precision = std::is_same_v<T, bf16> ? ::plait::spec::Precision::bf16 : ::plait::spec::Precision::fp32;
  MemoryTracker tracker;
  StageModel m(config, spec, tracker);
  m.init_parameters(1);
  const int rows = 3, seq = 20;
  const auto segs = segments_from_lengths(seq, {12, 8});
  const Batch b = random_batch(rows, seq, config.vocab, 2);
  const int threads = omp_get_max_threads();
  std::vector<::plait::spec::UnitMemory> mem;
  for (const Segment& s : segs) mem.push_back(::plait::spec::unit_memory(config, spec.part(), rows, s, spec.precision, threads));
  // bf16 rounds each layer's completed dK/dV into its kept copy before freeing the fp32
  // accumulator: B's K/V peak is one layer's copy above its start, as the unit table says
  // (backward_peak_kv, fused_peak_kv; 0 in fp32). Derived here too, so the table is checked.
  auto kept_layer = [&](const ::plait::spec::UnitMemory& u) -> long long {
    if (u.dkv_kept == u.dkv || spec.layer_count() == 0) return 0;
    return static_cast<long long>(u.dkv_kept) / spec.layer_count();
  };

  auto act = [&] { return static_cast<long long>(tracker.current(kAct)); };
  auto kv = [&] { return static_cast<long long>(tracker.current(kKV)); };
  auto peak_over = [&](std::size_t before) {
    return static_cast<long long>(tracker.peak_total() - before);
  };
  auto act_peak_over = [&](long long before) {
    return static_cast<long long>(tracker.peak(kAct)) - before;
  };
  auto kv_peak_over = [&](long long before) {
    return static_cast<long long>(tracker.peak(kKV)) - before;
  };
  std::vector<std::vector<T>> bufs;
  for (const Segment& s : segs) {
    const std::size_t n = static_cast<std::size_t>(rows) * s.length * config.hidden;
    bufs.emplace_back(n, T(0.01f));
    const auto tok = columns(b.tokens, rows, seq, s);
    const auto tgt = columns(b.targets, rows, seq, s);
    const long long a0 = act(), k0 = kv();
    tracker.reset_peaks();
    const std::size_t total0 = tracker.current_total();
    std::vector<T> out(n);
    const T* in = spec.has_embedding ? nullptr : bufs.back().data();
    const std::int32_t* tp = spec.has_embedding ? tok.data() : nullptr;
    if (spec.has_head) {
      m.forward_loss(0, rows, s, in, tp, tgt.data(), 0.1);
    } else {
      m.forward(0, rows, s, in, tp, out.data());
    }
    const ::plait::spec::UnitMemory& u = mem[s.index];
    EXPECT_EQ(act() - a0, static_cast<long long>(u.forward_activations)) << "F " << s.index;
    EXPECT_EQ(kv() - k0, static_cast<long long>(u.forward_kv)) << "F " << s.index;
    EXPECT_EQ(peak_over(total0), static_cast<long long>(u.forward_peak)) << "F " << s.index;
    EXPECT_EQ(act_peak_over(a0), static_cast<long long>(u.forward_peak_activations)) << "F " << s.index;
    EXPECT_EQ(kv_peak_over(k0), static_cast<long long>(u.forward_kv)) << "F " << s.index;
  }
  std::size_t all_dkv = 0;
  for (const ::plait::spec::UnitMemory& u : mem) all_dkv += u.dkv;
  for (int i = 1; i >= 0; --i) {
    const ::plait::spec::UnitMemory& u = mem[i];
    const long long a0 = act(), k0 = kv();
    tracker.reset_peaks();
    const std::size_t total0 = tracker.current_total() + (i == 1 ? all_dkv : 0);
    const long long kv_start = k0 + (i == 1 ? static_cast<long long>(all_dkv) : 0);
    std::vector<T> grad_in(bufs[i].size());
    const T* go = spec.has_head ? nullptr : bufs[i].data();
    T* gi = spec.has_embedding ? nullptr : grad_in.data();
    if (fused) {
      m.backward(0, segs[i], go, gi);
      EXPECT_EQ(kv_peak_over(kv_start), kept_layer(u)) << "BW " << i;
      EXPECT_EQ(kv_peak_over(kv_start), static_cast<long long>(u.fused_peak_kv)) << "BW " << i;
      EXPECT_EQ(act() - a0, -static_cast<long long>(u.forward_activations)) << "BW " << i;
      EXPECT_EQ(kv() - k0, (i == 1 ? static_cast<long long>(all_dkv) : 0) -
                               static_cast<long long>(u.forward_kv + u.dkv))
          << "BW " << i;
      EXPECT_EQ(peak_over(total0), static_cast<long long>(u.fused_peak)) << "BW " << i;
      EXPECT_EQ(act_peak_over(a0), static_cast<long long>(u.fused_peak_activations)) << "BW " << i;
    } else {
      m.backward_input(0, segs[i], go, gi);
      EXPECT_EQ(kv_peak_over(kv_start), kept_layer(u)) << "B " << i;
      EXPECT_EQ(kv_peak_over(kv_start), static_cast<long long>(u.backward_peak_kv)) << "B " << i;
      EXPECT_EQ(act() - a0, static_cast<long long>(u.backward_kept) -
                                static_cast<long long>(u.backward_freed))
          << "B " << i;
      EXPECT_EQ(kv() - k0, (i == 1 ? static_cast<long long>(all_dkv) : 0) -
                               static_cast<long long>(u.forward_kv + u.dkv) +
                               static_cast<long long>(u.dkv_kept))
          << "B " << i;
      EXPECT_EQ(peak_over(total0), static_cast<long long>(u.backward_peak)) << "B " << i;
      EXPECT_EQ(act_peak_over(a0), static_cast<long long>(u.backward_peak_activations)) << "B " << i;
    }
  }
  if (!fused) {
    for (int i = 0; i < 2; ++i) {
      const long long a0 = act(), k0 = kv();
      m.backward_weight(0, segs[i]);
      EXPECT_EQ(act() - a0, -static_cast<long long>(mem[i].activations_after_b())) << "W " << i;
      EXPECT_EQ(kv() - k0, -static_cast<long long>(mem[i].dkv_kept)) << "W " << i;
    }
  }
  EXPECT_EQ(act(), 0);
  EXPECT_EQ(kv(), 0);
}

TEST_P(UnitMemory, TrackerMatchesThePredictionOnEveryKindOfStage) {
  const spec::ModelSpec c = tiny();
  const std::vector<StageSpec> specs = {StageSpec::whole_model(c), {0, 2, false, false},
                                        {1, 2, false, true},       {0, 1, true, false},
                                        {0, 0, true, false},       {2, 2, false, true}};
  for (StageSpec spec : specs) {
    for (int recompute = 0; recompute <= spec.layer_count(); ++recompute) {
      spec.recompute_layers = recompute;
      for (bool fused : {false, true}) {
        SCOPED_TRACE("stage [" + std::to_string(spec.first_layer) + "," +
                     std::to_string(spec.last_layer) + ") emb=" + std::to_string(spec.has_embedding) +
                     " head=" + std::to_string(spec.has_head) + " recompute=" +
                     std::to_string(recompute) + " fused=" + std::to_string(fused));
        check_stage<float>(c, spec, fused);
        check_stage<bf16>(c, spec, fused);
      }
    }
  }
}

TEST_P(UnitMemory, CapacityErrorNamesTheCategoryAndLeavesTheModelUsable) {
  const spec::ModelSpec config = tiny();
  const StageSpec spec = StageSpec::whole_model(config);
  const int rows = 2;
  const Segment seg{0, 0, 16};
  const Batch b = random_batch(rows, 16, config.vocab, 1);
  MemoryTracker probe;
  std::size_t static_bytes = 0;
  {
    StageModel m(config, spec, probe);
    static_bytes = probe.current_total();
  }
  const ::plait::spec::UnitMemory u = ::plait::spec::unit_memory(config, spec.part(), rows, seg, ::plait::spec::Precision::fp32, omp_get_max_threads());
  // Room for the parameters and gradients and half of one forward.
  MemoryTracker tracker(static_bytes + u.forward_peak / 2);
  StageModel m(config, spec, tracker);
  m.init_parameters(1);
  try {
    m.forward_loss(0, rows, seg, nullptr, b.tokens.data(), b.targets.data(), 1.0);
    FAIL() << "expected an out-of-memory error";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::string(name_of(e.category()))), std::string::npos);
  }
  // Nothing of the failed unit is left behind, and with enough room the same call succeeds.
  EXPECT_EQ(m.microbatches_in_flight(), 0u);
  EXPECT_EQ(tracker.current_total(), static_bytes);
  tracker.set_capacity(static_bytes + u.forward_peak);
  EXPECT_NO_THROW(m.forward_loss(0, rows, seg, nullptr, b.tokens.data(), b.targets.data(), 1.0));
}

TEST_P(UnitMemory, ParametersAndGradientsAreOneBufferEach) {
  const spec::ModelSpec config = tiny();
  MemoryTracker tracker;
  StageModel m(config, StageSpec::whole_model(config), tracker);
  EXPECT_EQ(tracker.current(MemoryCategory::kParameters), m.parameters().size_bytes());
  EXPECT_EQ(tracker.current(MemoryCategory::kGradients), m.gradients().size_bytes());
  std::size_t counted = 0;
  for (const NamedTensor& t : m.tensors()) counted += t.numel;
  EXPECT_EQ(static_cast<std::int64_t>(counted), config.parameter_count());
}

PLAIT_FOR_EVERY_FAMILY(UnitMemory);

}  // namespace
}  // namespace plait::model
