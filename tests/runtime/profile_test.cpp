// Profiles and the simulator inputs derived from the engine: the unit profiler measures every
// piece, its files read back (the latency table through the simulator's strict reader), the
// profile-fed cost model composes units from layers, and the simulator's memory model composes
// the engine's unit bytes (spec::unit_memory) by stage part.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "plait/runtime/profile_cost_model.h"
#include "plait/runtime/profile_json.h"
#include "plait/runtime/unit_profiler.h"
#include "plait/sim/latency_table.h"
#include "plait/sim/memory_model.h"
#include "plait/spec/tensor_parallel_plan.h"

namespace plait::runtime {
namespace {

namespace fs = std::filesystem;

const spec::ModelSpec kModel = spec::gpt2_model(4, 32, 4, 256, 64);

fs::path temp_file(const std::string& name) {
  return fs::temp_directory_path() / ("plait_profile_test_" + std::to_string(::getpid()) + "_" + name);
}

// Every unit of every segment (layer, embedding, head) has a positive F, B and W.
void expect_every_piece_measured(const SegmentProfile& p, std::size_t segments) {
  for (const auto* list : {&p.layer, &p.embedding, &p.head}) {
    ASSERT_EQ(list->size(), segments);
    for (const UnitTimes& u : *list) {
      EXPECT_GT(u.forward, 0);
      EXPECT_GT(u.backward_input, 0);
      EXPECT_GT(u.backward_weight, 0);
    }
  }
}

TEST(UnitProfiler, MeasuresEveryPieceOfEverySegment) {
  const spec::SequencePartition segments = spec::even_partition(kModel, 32, 3);
  const SegmentProfile p = profile_segments(kModel, 2, segments, {3, 2});
  ASSERT_EQ(p.layer.size(), 3u);
  for (const auto* list : {&p.layer, &p.embedding, &p.head}) {
    for (const UnitTimes& u : *list) {
      EXPECT_GT(u.forward, 0);
      EXPECT_GT(u.backward_input, 0);
      EXPECT_GT(u.backward_weight, 0);
    }
  }
  const BatchProfile b = profile_batches(kModel, 16, 3, {3, 2});
  EXPECT_EQ(b.layer.size(), 3u);
  EXPECT_EQ(b.seq, 16);
}

// The pipeline-like orders (W after the next micro-batch's F and B, any number in flight, idles
// between units) are orders the stage accepts, and every piece is still measured.
TEST(UnitProfiler, DeferredWeightsAndIdlesKeepEveryPieceMeasured) {
  for (int in_flight : {1, 3}) {
    ProfileOptions o;
    o.repeats = 3;
    o.in_flight = in_flight;
    o.defer_weight = true;
    o.slowdown = 1.5;
    const SegmentProfile p = profile_segments(kModel, 2, spec::even_partition(kModel, 32, 2), o);
    expect_every_piece_measured(p, 2);
  }
}

TEST(ProfileFiles, LatencyTableAndSegmentProfileReadBack) {
  const BatchProfile b = profile_batches(kModel, 16, 3, {3, 1});
  const fs::path table = temp_file("table.json");
  std::ofstream(table) << sim::latency_table_json(latency_entries(b, profile_model_name(kModel), "host")).dump();
  const sim::LatencyTable read = sim::read_latency_table(table.string(), /*strict=*/true);
  ASSERT_EQ(read.entries.size(), 3u);
  bool layer = false;
  for (const sim::LatencyEntry& e : read.entries) {
    EXPECT_EQ(e.model, "plait_l4_h32_a4_v256");
    EXPECT_EQ(e.seq, 16);
    EXPECT_EQ(e.forward_ms.size(), 3u);
    if (e.dtype == "float32") {
      layer = true;
      EXPECT_NEAR(e.forward_ms[1], b.layer[1].forward * 1e3, 1e-9);
      EXPECT_NEAR(e.backward_ms[2], b.layer[2].backward() * 1e3, 1e-9);
    }
  }
  EXPECT_TRUE(layer);
  fs::remove(table);

  const SegmentProfile p = profile_segments(kModel, 2, spec::even_partition(kModel, 32, 2), {3, 1});
  const fs::path file = temp_file("segments.json");
  std::ofstream(file) << to_json(p, 1).dump();
  const SegmentProfile back = read_segment_profile(file.string());
  EXPECT_EQ(back.model, p.model);
  EXPECT_EQ(back.partition, p.partition);
  EXPECT_NEAR(back.head[1].backward_weight, p.head[1].backward_weight, 1e-12);
  std::ofstream(file) << R"({"model": {"layers": 4, "hidden": 32, "heads": 4, "vocab": 256, "max_seq": 64},
    "microbatch_size": 2, "segments": [{"start": 0, "length": 8}, {"start": 9, "length": 8}],
    "layer": [], "embedding": [], "head": []})";
  try {
    read_segment_profile(file.string());
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), file.string() + ": segments[1]: expected contiguous segments from position 0");
  }
  fs::remove(file);
}

TEST(ProfileCostModel, UnitsAreLayersPlusEmbeddingAndHeadTimesSlowdown) {
  PipelinePlan plan;
  plan.model = kModel;
  plan.microbatch_size = 1;
  plan.partition = spec::even_partition(kModel, 16, 2);
  plan.vstage_layers = {1, 3};
  plan.vstage_specs = {{0, 1, true, false}, {1, 4, false, true}};
  plan.devices = {DeviceEmulation{}, DeviceEmulation{"slow", 2.5, {}}};
  SegmentProfile p;
  p.model = kModel;
  p.microbatch_size = 1;
  p.partition = plan.partition;
  p.layer = {{1, 2, 3}, {10, 20, 30}};
  p.embedding = {{0.5, 0.25, 0.125}, {0.5, 0.25, 0.125}};
  p.head = {{100, 200, 300}, {1000, 2000, 3000}};
  const ProfileCostModel cost(p, plan, {});
  using K = schedule::ActionKind;
  EXPECT_DOUBLE_EQ(cost.compute_seconds(0, K::F, 0, 0, 0), 1 + 0.5);
  EXPECT_DOUBLE_EQ(cost.compute_seconds(0, K::BW, 3, 1, 0), 20 + 30 + 0.25 + 0.125);
  EXPECT_DOUBLE_EQ(cost.compute_seconds(1, K::B, 0, 1, 1), 2.5 * (3 * 20 + 2000));
  EXPECT_DOUBLE_EQ(cost.compute_seconds(1, K::W, 0, 0, 1), 2.5 * (3 * 3 + 300));
  p.partition = spec::even_partition(kModel, 16, 4);
  EXPECT_THROW(ProfileCostModel(p, plan, {}), Error);
}

// A recomputing stage's B (and BW) also pays its recomputed layers' rebuild; a profile without
// rebuild times cannot cost a recomputing plan.
TEST(ProfileCostModel, RecomputedLayersAddTheirRebuildToB) {
  PipelinePlan plan;
  plan.model = kModel;
  plan.microbatch_size = 1;
  plan.partition = spec::even_partition(kModel, 16, 1);
  plan.vstage_layers = {4};
  plan.vstage_specs = {{0, 4, true, true, 3}};
  plan.devices = {DeviceEmulation{}};
  SegmentProfile p;
  p.model = kModel;
  p.microbatch_size = 1;
  p.partition = plan.partition;
  p.layer = {{1, 2, 3, 0.5}};
  p.embedding = {{0, 0, 0}};
  p.head = {{10, 20, 30}};
  const ProfileCostModel cost(p, plan, {});
  using K = schedule::ActionKind;
  EXPECT_DOUBLE_EQ(cost.compute_seconds(0, K::F, 0, 0, 0), 4 * 1 + 10);
  EXPECT_DOUBLE_EQ(cost.compute_seconds(0, K::B, 0, 0, 0), 4 * 2 + 3 * 0.5 + 20);
  EXPECT_DOUBLE_EQ(cost.compute_seconds(0, K::BW, 0, 0, 0), 4 * 5 + 3 * 0.5 + 50);
  EXPECT_DOUBLE_EQ(cost.compute_seconds(0, K::W, 0, 0, 0), 4 * 3 + 30);
  p.layer[0].recompute = 0;
  EXPECT_THROW(ProfileCostModel(p, plan, {}), Error);
}

// Under tensor parallelism a unit is the rank's compute times the slow-down plus its TP
// collectives over the group's link, unslowed: spec::tp_collectives rings at the unit's tokens
// (F: 2 gathers + 2 reduce-scatters per layer, and the embedding's / head's), the rebuild's two
// gathers per recomputed layer in B; a profile of another degree cannot cost the plan.
TEST(ProfileCostModel, TensorParallelUnitsAddTheirCollectivesOnTheLinkUnslowed) {
  PipelinePlan plan;
  plan.model = kModel;
  plan.microbatch_size = 2;
  plan.rank_tensor_parallel = {2, 2};  // (two ranks of degree 2)
  plan.partition = spec::even_partition(kModel, 16, 2);
  plan.vstage_layers = {1, 3};
  plan.vstage_specs = {{0, 1, true, false}, {1, 4, false, true, 2}};
  plan.devices = {DeviceEmulation{"slow", 4, {}}, DeviceEmulation{"slow", 4, {}}};
  SegmentProfile p;
  p.model = kModel;
  p.microbatch_size = 2;
  p.tensor_parallel = 2;
  p.partition = plan.partition;
  p.layer = {{1, 2, 3, 0.5}, {10, 20, 30, 0.5}};
  p.embedding = {{0.5, 0.25, 0.125}, {0.5, 0.25, 0.125}};
  p.head = {{100, 200, 300}, {1000, 2000, 3000}};
  const sim::LinkProfile tp_link{1e-5, 2e9};
  const ProfileCostModel cost(p, plan, {}, tp_link);
  const double tokens = 2 * 8;  // micro-batch 2 x segment 8
  const auto ring = [&](spec::Collective c, double bytes) {
    return spec::ring_collective_seconds(c, bytes, 2, tp_link.latency_seconds, tp_link.bandwidth_bytes_per_second);
  };
  const double gather = ring(spec::Collective::all_gather, tokens * 32 * 4);  // fp32 activations
  const double scatter = ring(spec::Collective::reduce_scatter, tokens * 32 * 4);
  const double reduce = ring(spec::Collective::all_reduce, tokens * 4);
  using K = schedule::ActionKind;
  // Stage 0: one layer and the embedding. F: 2 gathers, 2 + 1 reduce-scatters; W: 4 + 1 gathers.
  EXPECT_NEAR(cost.compute_seconds(0, K::F, 0, 0, 0), 4 * (1 + 0.5) + 2 * gather + 3 * scatter, 1e-9);
  EXPECT_NEAR(cost.compute_seconds(0, K::W, 0, 1, 0), 4 * (30 + 0.125) + 5 * gather, 1e-9);
  // Stage 1: three layers (2 recomputed) and the head. F: 6 + 1 gathers, 6 reduce-scatters, 3
  // all-reduces; B: 6 gathers, 6 + 1 reduce-scatters, and the rebuilds (compute and 2 x 2 gathers).
  EXPECT_NEAR(cost.compute_seconds(1, K::F, 0, 0, 1), 4 * (3 * 1 + 100) + 7 * gather + 6 * scatter + 3 * reduce, 1e-9);
  EXPECT_NEAR(cost.compute_seconds(1, K::B, 0, 1, 1),
              4 * (3 * 20 + 2 * 0.5 + 2000) + 6 * gather + 7 * scatter + 4 * gather, 1e-9);
  EXPECT_NEAR(cost.compute_seconds(1, K::BW, 0, 1, 1),
              4 * (3 * 50 + 2 * 0.5 + 5000) + 6 * gather + 7 * scatter + 4 * gather + 13 * gather, 1e-9);
  p.tensor_parallel = 1;
  EXPECT_THROW(ProfileCostModel(p, plan, {}, tp_link), Error);
}

// The profiler times one rank's part of a TP unit (over a stand-in group, no collectives): every
// piece of both TP ranks is measured, on its sequence slice, in either time basis.
TEST(UnitProfiler, MeasuresOneRanksPartOfATensorParallelUnit) {
  for (int tp_rank : {0, 1}) {
    ProfileOptions o;
    o.repeats = 3;
    o.tensor_parallel = 2;
    o.tp_rank = tp_rank;
    o.cpu_time = tp_rank == 1;
    const SegmentProfile p = profile_segments(kModel, 2, spec::even_partition(kModel, 32, 2), o);
    EXPECT_EQ(p.tensor_parallel, 2);
    expect_every_piece_measured(p, 2);
  }
}

// Asked to, the profiler also times the layers' rebuild, and the segment profile file keeps it.
TEST(UnitProfiler, MeasuresTheRebuildOfARecomputedLayer) {
  ProfileOptions o;
  o.repeats = 3;
  o.recompute = true;
  const SegmentProfile p = profile_segments(kModel, 2, spec::even_partition(kModel, 32, 2), o);
  for (const UnitTimes& u : p.layer) EXPECT_GE(u.recompute, 0);
  SegmentProfile q = p;
  q.layer[1].recompute = 1.25e-3;
  const fs::path file = temp_file("recompute.json");
  std::ofstream(file) << to_json(q, 1).dump();
  const SegmentProfile back = read_segment_profile(file.string());
  EXPECT_NEAR(back.layer[1].recompute, 1.25e-3, 1e-12);
  EXPECT_EQ(back.head[0].recompute, 0);
  fs::remove(file);
}

// The simulator's memory model charges each virtual stage's units what the engine allocates for
// that stage part (embedding on the first, head on the last), for both families.
TEST(SimulatorMemory, ComposesTheEngineBytesOfEveryStagePart) {
  for (spec::Family family : {spec::Family::gpt2, spec::Family::llama}) {
    spec::ModelSpec m = spec::gpt2_model(6, 48, 6, 300, 128);
    if (family == spec::Family::llama) {
      m.family = family;
      m.kv_heads = 3;
      m.ffn_hidden = 80;
    }
    const spec::SequencePartition partition = spec::partition_from_lengths(m, {40, 24, 32});
    const int batch = 3;
    // Stages: 2 layers + embedding, 3 layers, 1 layer + head.
    const sim::MemoryModel memory(m, {2, 3, 1}, partition, batch, {spec::Precision::fp32, {}, 1});
    const std::vector<model::StageSpec> specs = {{0, 2, true, false}, {2, 5, false, false}, {5, 6, false, true}};
    for (int v = 0; v < 3; ++v) {
      for (int j = 0; j < 3; ++j) {
        const spec::UnitMemory u =
            spec::unit_memory(m, specs[v].part(), batch, partition.segment(j), spec::Precision::fp32, 1);
        EXPECT_EQ(memory.activation_bytes(v, j), static_cast<double>(u.forward_activations + u.forward_kv))
            << "stage " << v << " segment " << j;
        EXPECT_EQ(memory.held_for_weight_bytes(v, j), static_cast<double>(u.activations_after_b() + u.dkv))
            << "stage " << v << " segment " << j;
      }
      EXPECT_EQ(memory.parameter_count(v), m.stage_parameters(specs[v].layer_count(), v == 0, v == 2));
    }
  }
}

}  // namespace
}  // namespace plait::runtime
