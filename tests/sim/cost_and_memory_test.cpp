#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "plait/core/error.h"
#include "plait/schedule/lowering.h"
#include "plait/schedule/schedule_family.h"
#include "plait/schedule/schedule_text.h"
#include "plait/sim/event_simulator.h"
#include "plait/sim/flops_cost_model.h"
#include "plait/sim/memory_model.h"
#include "plait/spec/model_presets.h"
#include "plait/spec/sequence_partition.h"
#include "plait/sim/stage_layers.h"
#include "plait/sim/zorse_profiles.h"

namespace plait::sim {
namespace {

using schedule::ActionKind;

const spec::ModelSpec k7B = spec::gpt2_model(32, 4096, 32, 50257, 32768);

DeviceProfile flat(double flops) {
  DeviceProfile d;
  d.name = "flat";
  d.sustained_flops = flops;
  return d;
}

// F = linear + attention; B = linear + 2 attention; W = linear (per layer); the head adds
// 2sHV to each; durations are FLOPs over the sustained rate; attention grows with the prefix.
TEST(FlopsCostModel, SplitsBackwardIntoInputAndWeightGradients) {
  const auto part = spec::even_partition(k7B, 32768, 4);
  const std::vector<int> layers = split_layers(32, 8);
  const FlopsCostModel cost(k7B, layers, part, 2, {flat(1e14)});
  for (int seg = 0; seg < 4; ++seg) {
    const std::int64_t start = part.start(seg), len = part.lengths[seg];
    const double lin = 2 * k7B.layer_linear_flops(len);
    const double att = 2 * k7B.layer_attention_flops(start, len);
    const UnitFlops& mid = cost.unit_flops(seg, 3);
    EXPECT_DOUBLE_EQ(mid.total(ActionKind::F), 4 * (lin + att));
    EXPECT_DOUBLE_EQ(mid.total(ActionKind::B), 4 * (lin + 2 * att));
    EXPECT_DOUBLE_EQ(mid.total(ActionKind::W), 4 * lin);
    EXPECT_DOUBLE_EQ(mid.total(ActionKind::BW), 2 * mid.total(ActionKind::F));
    const double head = 2 * 2.0 * len * 4096 * 50257;
    EXPECT_DOUBLE_EQ(cost.unit_flops(seg, 7).total(ActionKind::F), 4 * (lin + att) + head);
    EXPECT_DOUBLE_EQ(cost.compute_seconds(0, ActionKind::W, 0, seg, 3), 4 * lin / 1e14);
  }
  // Even segments: later ones cost more (longer prefix).
  EXPECT_GT(cost.compute_seconds(0, ActionKind::F, 0, 3, 3), 1.5 * cost.compute_seconds(0, ActionKind::F, 0, 0, 3));
}

// Every action pays its device's fixed cost once (a fused BW once, not twice), so a rank's busy
// time grows by exactly its action count times the cost: more segments pay more.
TEST(FlopsCostModel, EveryActionPaysTheFixedCostOnce) {
  DeviceProfile with = flat(1e14);
  with.action_overhead_seconds = 0.004;
  for (int k : {1, 4, 8}) {
    const auto part = spec::flops_partition(k7B, 32768, k);
    const std::vector<int> layers = split_layers(32, 4);
    const FlopsCostModel plain(k7B, layers, part, 1, {flat(1e14)}), fixed(k7B, layers, part, 1, {with});
    for (ActionKind kind : {ActionKind::F, ActionKind::B, ActionKind::W, ActionKind::BW}) {
      EXPECT_NEAR(fixed.compute_seconds(0, kind, 0, k - 1, 2), plain.compute_seconds(0, kind, 0, k - 1, 2) + 0.004, 1e-12);
    }
    for (const char* family : {"seq1f1b", "seq-zb"}) {
      const schedule::Schedule s = schedule::generate_schedule(family, {4, 1, 6, k});
      const schedule::LoweredSchedule lowered = schedule::lower(s);
      const SimResult a = simulate(s, lowered, plain, nullptr, {false, false});
      const SimResult b = simulate(s, lowered, fixed, nullptr, {false, false});
      for (int r = 0; r < 4; ++r) {
        EXPECT_NEAR(b.ranks[r].busy - a.ranks[r].busy, 0.004 * static_cast<double>(s.ranks[r].size()), 1e-9)
            << family << " k=" << k;
      }
    }
  }
}

// The default profile is the A100 datasheet's peak times the efficiency Zorse measured per layer
// on A100 80GB: it rises with the work per kernel and stays under the peak, a device of twice the
// peak runs twice as fast, and cutting a sequence into segments costs more than running it whole
// (each segment pays the fixed cost and runs at the lower efficiency of less work).
TEST(FlopsEfficiency, DefaultProfileIsPeakTimesMeasuredEfficiency) {
  const DeviceProfile a100 = default_device_profile();
  ASSERT_TRUE(a100.efficiency.has_value());
  EXPECT_FALSE(a100.measured.has_value());
  EXPECT_DOUBLE_EQ(a100.efficiency->peak_flops, 312e12);
  const FlopsEfficiency& e = *a100.efficiency;
  EXPECT_LT(e.forward_efficiency(1e10), e.forward_efficiency(1e11));
  EXPECT_LT(e.forward_efficiency(1e11), e.forward_efficiency(1e13));
  EXPECT_LT(e.forward_efficiency(1e14), 1.0);
  EXPECT_GT(e.forward_efficiency(1e13), 0.3);
  DeviceProfile twice = a100;
  twice.efficiency->peak_flops *= 2;
  EXPECT_NEAR(twice.forward_seconds(4, 1e12, 0), a100.forward_seconds(4, 1e12, 0) / 2, 1e-15);
  for (int k : {2, 4, 16}) {
    const auto whole = spec::even_partition(k7B, 32768, 1), cut = spec::even_partition(k7B, 32768, k);
    const std::vector<int> layers = split_layers(32, 8);
    const FlopsCostModel one(k7B, layers, whole, 1, {a100}), many(k7B, layers, cut, 1, {a100});
    double segments = 0;
    for (int j = 0; j < k; ++j) segments += many.compute_seconds(0, ActionKind::F, 0, j, 3);
    EXPECT_GT(segments, one.compute_seconds(0, ActionKind::F, 0, 0, 3)) << k;
  }
}

// A JSON profile states its peak and the GPU type whose measured efficiency it borrows.
TEST(FlopsEfficiency, JsonProfilesGiveAPeakAndAMeasuredEfficiency) {
  const std::string dir = ::testing::TempDir();
  auto write = [&](const std::string& name, const std::string& text) {
    const std::string path = dir + "/" + name;
    std::ofstream(path) << text;
    return path;
  };
  const DeviceProfile h = resolve_device(
      write("h.json", R"({"peak_tflops": 624, "efficiency_of": "zorse:a100x80", "efficiency_peak_tflops": 312, "memory_gib": 80})"),
      k7B);
  ASSERT_TRUE(h.efficiency.has_value());
  EXPECT_NEAR(h.forward_seconds(1, 1e12, 0), default_device_profile().forward_seconds(1, 1e12, 0) / 2, 1e-15);
  for (const auto& [text, field] : std::vector<std::pair<std::string, std::string>>{
           {R"({"sustained_tflops": 100, "peak_tflops": 312, "efficiency_of": "zorse:a100x80", "efficiency_peak_tflops": 312})", "sustained_tflops"},
           {R"({"peak_tflops": 312, "efficiency_of": "a100", "efficiency_peak_tflops": 312})", "efficiency_of"},
           {R"({"peak_tflops": 312, "efficiency_of": "zorse:tpu", "efficiency_peak_tflops": 312})", "efficiency_of"},
           {R"({"peak_tflops": 312, "efficiency_of": "zorse:a100x80"})", "efficiency_peak_tflops"}}) {
    try {
      resolve_device(write("bad.json", text), k7B);
      ADD_FAILURE() << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  }
}

// A measured profile reproduces its own fit on the model it was measured for:
// t = slope * b + intercept per layer, with B and W sharing the backward by FLOPs.
TEST(FlopsCostModel, MeasuredProfileReproducesItsFit) {
  DeviceProfile d;
  d.name = "measured";
  MeasuredLayerTiming m;
  m.forward = line_curve(0.010, 0.002);
  m.backward = line_curve(0.020, 0.003);
  m.reference_flops = 1e12;
  d.measured = m;
  EXPECT_NEAR(d.forward_seconds(1, 1e12, 0), 0.012, 1e-12);       // b = 1
  EXPECT_NEAR(d.forward_seconds(2, 4e12, 0), 2 * (0.040 + 0.002), 1e-12);  // b = 4, 2 layers
  const double b_part = d.backward_seconds(1, 1.5e12, 0.75, 0);
  const double w_part = d.backward_seconds(1, 0.5e12, 0.25, 0);
  EXPECT_NEAR(b_part + w_part, 0.023, 1e-12);  // the fitted full backward at b = 1
}

// A model reads the Zorse table of its own family and hidden size — never another family's, and
// never a nearest size: a GPT of hidden 4096 reads deepspeedgpt_6.7b, a LLaMA of hidden 2048
// deepspeedllama_tiny (on an L4 its forward is 1.12 ms per sample and layer there, where GPT
// 1.3B's table says 8.99 ms), and a size no table measured is an error naming the choices.
TEST(ZorseProfiles, ReadTheTableOfTheSameFamilyAndSize) {
  const std::vector<std::string> gpus = zorse_gpu_types();
  EXPECT_GE(gpus.size(), 15u);
  const DeviceProfile v100 = zorse_device_profile("v100x16", "float16", k7B);
  ASSERT_TRUE(v100.measured.has_value());
  EXPECT_EQ(v100.measured->model, "deepspeedgpt_6.7b");
  EXPECT_EQ(v100.measured->seq, 512);
  EXPECT_DOUBLE_EQ(v100.memory_bytes, 16.0 * 1024 * 1024 * 1024);
  EXPECT_GT(v100.measured->forward.slope, 0);
  const spec::ModelSpec gpt_small = spec::gpt2_model(24, 2048, 16, 50257, 512);
  EXPECT_EQ(zorse_device_profile("p40", "float16", gpt_small).measured->model, "deepspeedgpt_1.3b");
  spec::ModelSpec tiny_llama = spec::find_model_preset("tinyllama-1.1b")->model;
  tiny_llama.max_seq = 1024;
  EXPECT_EQ(zorse_device_profile("l4", "float16", tiny_llama).measured->seq, 1024);  // the longest
  const DeviceProfile l4 = zorse_device_profile("l4", "float16", tiny_llama, {"", 512});
  EXPECT_EQ(l4.measured->model, "deepspeedllama_tiny");
  EXPECT_EQ(l4.measured->seq, 512);
  // The curve fitted to the measured micro-batch sizes 1..4 (1.36, 2.41, 3.51, 4.71 ms per layer
  // at 512 tokens) gives them back; an entry without samples keeps the table's line (slope 8.99 ms).
  const double measured_ms[] = {1.3624, 2.4146, 3.5126, 4.7143};
  for (int b = 1; b <= 4; ++b) EXPECT_NEAR(l4.measured->forward.at(b) * 1e3 / measured_ms[b - 1], 1.0, 0.03) << b;
  const DeviceProfile gpt_l4 = zorse_device_profile("l4", "float16", gpt_small);
  EXPECT_FALSE(gpt_l4.measured->forward.has_knee());
  EXPECT_NEAR(gpt_l4.measured->forward.slope, 8.99e-3, 0.01e-3);
  try {
    zorse_device_profile("l4", "float16", spec::gpt2_model(12, 768, 12, 50257, 512));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("measures no gpt2 model of hidden size 768 on l4"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("--profile-model"), std::string::npos) << e.what();
  }
  // The user's choice is read, scaled by FLOPs, or refused when that table lacks the device.
  EXPECT_EQ(zorse_device_profile("l4", "float16", spec::gpt2_model(12, 768, 12, 50257, 512),
                                 {"deepspeedgpt_1.3b", 512})
                .measured->model,
            "deepspeedgpt_1.3b");
  EXPECT_THROW(zorse_device_profile("a100x40", "float16", k7B, {"deepspeedgpt_1.3b", 512}), Error);
  EXPECT_THROW(zorse_device_profile("tpu-v9", "float16", k7B), Error);
  EXPECT_THROW(resolve_device("a200", k7B), Error);
  EXPECT_EQ(resolve_devices("a100-80gb,zorse:t4", k7B).size(), 2u);
}

// Static memory: 12H^2 + 13H per layer, embeddings on stage 0, final norm and LM head last;
// 2 + 4 + 12 bytes per parameter in bf16. Units: the model description's bf16 table
// (spec/unit_memory.h), per token and GPT layer 2(9C) + 16 kept to W, 2(5C) + 4 n_h freed at B,
// 2(2C) of K/V; with recomputation only the layer inputs 2C and the K/V.
TEST(MemoryModel, StaticAndPerUnitBytes) {
  const auto part = spec::even_partition(k7B, 32768, 4);
  const std::vector<int> layers = split_layers(32, 4);
  const MemoryModel mem(k7B, layers, part, 1, MemoryOptions{});
  const std::int64_t H = 4096, per_layer = 12 * H * H + 13 * H;
  EXPECT_EQ(mem.parameter_count(1), 8 * per_layer);
  EXPECT_EQ(mem.parameter_count(0), 8 * per_layer + (50257 + 32768) * H);
  EXPECT_EQ(mem.parameter_count(3), 8 * per_layer + 2 * H + 50257 * H);
  const StaticMemory s = mem.static_memory({1});
  EXPECT_DOUBLE_EQ(s.total(), 18.0 * 8 * per_layer);
  // Segment 2 of 4 (8192 tokens from 16384) on a middle stage of 8 layers.
  const double per_token_layer = 2 * 9 * H + 16 + 2 * 5 * H + 4 * 32 + 2 * 2 * H;
  EXPECT_DOUBLE_EQ(mem.activation_bytes(1, 2), 8192.0 * 8 * per_token_layer);
  // After B: what W needs (2(9C) + 16 and the B outputs 2(9C)) and the dK/dV, whose fp32
  // accumulator is rounded to a bf16 copy once the unit's B completes (2 x 2C; the policy table,
  // spec/precision_policy.h, "dkv_kept").
  EXPECT_DOUBLE_EQ(mem.held_for_weight_bytes(1, 2), 8192.0 * 8 * (2 * 9 * H + 16 + 2 * 9 * H + 2 * 2 * H));
  // The head stage adds x_final, its norm (2 x 2C + 8) and the logits, bf16 in this policy (the
  // cross-entropy reads them into fp32 row by row).
  EXPECT_DOUBLE_EQ(mem.activation_bytes(3, 0) - mem.activation_bytes(1, 0), 8192.0 * (50257 * 2 + 4 * H + 8));
  const MemoryModel recomputed(k7B, layers, part, 1, MemoryOptions{spec::Precision::bf16, spec::Recompute::full(), 1});
  EXPECT_DOUBLE_EQ(recomputed.activation_bytes(1, 2), 8192.0 * 8 * (2 * H + 2 * 2 * H));
}

// The simulator's activation bytes follow the schedule: 1F1B holds p micro-batches on rank 0,
// GPipe holds all m.
TEST(MemoryModel, PeakActivationsFollowTheSchedule) {
  const spec::ModelSpec tiny = spec::gpt2_model(4, 64, 4, 100, 16);
  const auto part = spec::even_partition(tiny, 16, 1);
  const std::vector<int> layers = split_layers(4, 4);
  const MemoryModel mem(tiny, layers, part, 1, MemoryOptions{});
  const UniformCostModel cost(1, 1, 1);
  const double unit = mem.activation_bytes(0, 0);
  for (const char* name : {"1f1b", "gpipe"}) {
    const schedule::Schedule s = schedule::generate_schedule(name, {4, 1, 6, 1});
    const SimResult r = simulate(s, schedule::lower(s), cost, &mem);
    EXPECT_DOUBLE_EQ(r.ranks[0].peak_activation_bytes, (std::string(name) == "gpipe" ? 6 : 4) * unit) << name;
  }
  // ZB-H1: B keeps what W needs until W runs.
  const schedule::Schedule zb = schedule::parse_schedule("F0.0 B0.0 F1.0 W0.0 B1.0 W1.0\n", "zb");
  const auto one = spec::even_partition(tiny, 16, 1);
  const MemoryModel m1(tiny, {4}, one, 1, MemoryOptions{});
  const SimResult r = simulate(zb, schedule::lower(zb), cost, &m1);
  EXPECT_DOUBLE_EQ(r.ranks[0].peak_activation_bytes, m1.activation_bytes(0, 0) + m1.held_for_weight_bytes(0, 0));
}

// As the engine allocates: the ZB-H1 unit order by hand from the unit table, with the transients
// inside each action and the micro-batch's dK/dV from its first backward (the tracker's side is
// tests/runtime/mpi/memory_profile_test.cpp, where the two agree to the byte).
TEST(MemoryModel, AllocatedPeaksFollowTheEngineActionByAction) {
  const spec::ModelSpec tiny = spec::gpt2_model(4, 64, 4, 100, 16);
  const auto two = spec::even_partition(tiny, 16, 2);
  const UniformCostModel cost(1, 1, 1);
  for (bool recompute : {false, true}) {
    const MemoryModel m(tiny, {4}, two, 1,
                        MemoryOptions{spec::Precision::fp32, recompute ? spec::Recompute::full() : spec::Recompute{}, 1});
    const schedule::Schedule zb = schedule::parse_schedule("F0.0 F0.1 B0.1 B0.0 W0.1 W0.0\n", "zb");
    const SimResult r = simulate(zb, schedule::lower(zb), cost, &m);
    const spec::UnitMemory &u0 = m.unit_memory(0, 0), &u1 = m.unit_memory(0, 1);
    const double f = static_cast<double>(u0.forward_activations + u1.forward_activations);
    const double kv = static_cast<double>(u0.forward_kv + u1.forward_kv);
    const double dkv = static_cast<double>(u0.dkv + u1.dkv);
    // The activation peak: inside F0.1 or inside B0.1 (after both forwards), or inside B0.0.
    const double after_b1 = f - static_cast<double>(u1.backward_freed) + static_cast<double>(u1.backward_kept);
    const double act = std::max({static_cast<double>(u0.forward_activations + u1.forward_peak_activations),
                                 f + static_cast<double>(u1.backward_peak_activations),
                                 after_b1 + static_cast<double>(u0.backward_peak_activations)});
    EXPECT_DOUBLE_EQ(r.ranks[0].allocated.activations, act) << recompute;
    EXPECT_DOUBLE_EQ(r.ranks[0].allocated.kv_cache, kv + dkv) << recompute;  // at the first B
    EXPECT_GE(r.ranks[0].allocated.total, r.ranks[0].peak_activation_bytes) << recompute;
    EXPECT_DOUBLE_EQ(m.microbatch_dkv_bytes(0), dkv);
  }
}

// Messages: latency + bytes / bandwidth, queued on the sender's port, not blocking it.
TEST(EventSimulator, MessagesTakeLatencyPlusBytesOverBandwidth) {
  class Costs : public CostModel {
   public:
    double compute_seconds(int rank, ActionKind kind, std::int32_t, std::int32_t, std::int32_t) const override {
      return kind == ActionKind::F ? 1.0 : 2.0 * (rank + 1);  // rank 1 backward is slower
    }
    double transfer_seconds(int, int, std::int64_t bytes) const override { return 0.5 + bytes / 100.0; }
  } costs;
  const schedule::Schedule s = schedule::parse_schedule("F0.0 F1.0 BW0.0 BW1.0\nF0.0 BW0.0 F1.0 BW1.0\n", "t");
  schedule::LowerOptions options;
  options.message_bytes = [](const schedule::MessageKey&) { return 50; };  // 0.5 s on the wire
  const SimResult r = simulate(s, schedule::lower(s, options), costs, nullptr);
  // Rank 0: F0 [0,1], F1 [1,2]; act0 arrives at 2, act1 queues behind it: [2,3].
  // Rank 1: F0 [2,3], BW0 [3,7] (grad0 sent [7,8]), F1 [7,8], BW1 [8,12] (grad1 [12,13]).
  // Rank 0: BW0 [8,10], BW1 [13,15].
  EXPECT_DOUBLE_EQ(r.step_time, 15.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].busy, 6.0);
  EXPECT_DOUBLE_EQ(r.ranks[1].busy, 10.0);
  EXPECT_DOUBLE_EQ(r.bubble_fraction, 1.0 - 16.0 / 30.0);
  int sends = 0;
  for (const trace::Event& e : r.events) {
    if (e.kind == trace::EventKind::send) {
      ++sends;
      EXPECT_EQ(e.bytes, 50);
    }
  }
  EXPECT_EQ(sends, 4);
}

TEST(EventSimulator, RefusesAProgramThatCannotFinish) {
  const schedule::Schedule s =
      schedule::parse_schedule("F0.0 BW0.0 F1.0 BW1.0\nF1.0 BW1.0 F0.0 BW0.0\n", "t");
  EXPECT_THROW(simulate(s, schedule::lower(s), UniformCostModel(1, 1, 1), nullptr), Error);
}

TEST(ModelPresets, ShapesAndConfigFiles) {
  using spec::resolve_model;
  const spec::NamedModel m = resolve_model("gpt-13b", 8192);
  EXPECT_EQ(m.model.layers, 40);
  EXPECT_EQ(m.model.hidden, 5120);
  EXPECT_EQ(m.model.heads, 40);
  EXPECT_EQ(m.model.max_seq, 8192);
  EXPECT_THROW(resolve_model("gpt-99b", 8192), Error);
  const std::string path = testing::TempDir() + "/model.json";
  std::FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(R"({"train": {"steps": 3}, "model": {"layers": 4, "hidden": 256, "heads": 8, "vocab": 1000, "max_seq": 512}})", f);
  std::fclose(f);
  const spec::NamedModel c = resolve_model(path, 256);
  EXPECT_EQ(c.model.layers, 4);
  EXPECT_EQ(c.model.vocab, 1000);
  try {
    resolve_model(path, 1024);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.max_seq"), std::string::npos) << e.what();
  }
  EXPECT_THROW(split_layers(32, 64), Error);
  EXPECT_EQ(split_layers(10, 4), (std::vector<int>{3, 3, 2, 2}));
}

}  // namespace
}  // namespace plait::sim
