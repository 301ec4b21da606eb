// The "parallel" section (both forms of the contract) and the plan built from it: what is read,
// what the global batch is, and that every bad layout is one line naming the file and field.
#include "plait/runtime/parallel_config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "plait/core/error.h"
#include "plait/runtime/pipeline_plan.h"
#include "plait/schedule/schedule_family.h"

namespace plait::runtime {
namespace {

const std::string kHead = R"({"model": {"layers": 6, "hidden": 32, "heads": 4, "vocab": 256, "max_seq": 64},
  "train": {"steps": 2, "seq": 32, "microbatch_size": 2, "microbatches": 4, "segments": 4})";

JobConfig job(const std::string& parallel) {
  return parse_job_config(nlohmann::json::parse(kHead + R"(, "parallel": )" + parallel + "}"), "p.json");
}

std::string error_of(const std::string& parallel, int world) {
  try {
    build_pipeline_plan(job(parallel), world);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The InputError of reading a section (the plan is not built).
std::string parse_error(const std::string& parallel) {
  try {
    job(parallel);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ParallelConfig, GeneratedFormDefaultsAndGlobalBatch) {
  const JobConfig j = job(R"({"schedule": "seq1f1b", "pp": 2, "dp": 3})");
  EXPECT_EQ(j.parallel.form, ParallelConfig::Form::generated);
  EXPECT_EQ(j.parallel.world_size(), 6);
  EXPECT_EQ(j.global_microbatches(), 12);  // m = 4 per replica
  EXPECT_EQ(j.global_train().microbatches, 12);
  const PipelinePlan plan = build_pipeline_plan(j, 6);
  EXPECT_EQ(plan.vstage_layers, (std::vector<int>{3, 3}));
  EXPECT_EQ(plan.holders(0), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(plan.global_tokens(), 12 * 2 * 32);
  EXPECT_TRUE(plan.vstage_specs[0].has_embedding);
  EXPECT_TRUE(plan.vstage_specs[1].has_head);
  EXPECT_TRUE(plan.tied_table_split());
  // No section at all: one rank, Seq1F1B (which is 1F1B for one segment).
  const JobConfig none = parse_job_config(nlohmann::json::parse(kHead + "}"), "p.json");
  EXPECT_EQ(none.parallel.world_size(), 1);
  EXPECT_EQ(build_pipeline_plan(none, 1).schedule_name, "seq1f1b");
}

TEST(ParallelConfig, FlopsSplitRecutsACountedSegmentation) {
  // Narrow heads and a long sequence, so attention (which grows with the prefix) matters.
  auto make = [](const std::string& split) {
    return parse_job_config(
        nlohmann::json::parse(
            R"({"model": {"layers": 2, "hidden": 16, "heads": 2, "vocab": 256, "max_seq": 256},
                "train": {"steps": 1, "seq": 256, "microbatch_size": 1, "segments": 4},
                "parallel": {"pp": 2)" + split + "}}"),
        "p.json");
  };
  const auto e = make("").run.partition().lengths;
  const auto f = make(R"(, "split": "flops")").run.partition().lengths;
  EXPECT_EQ(e, (std::vector<std::int64_t>{64, 64, 64, 64}));
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(std::accumulate(f.begin(), f.end(), std::int64_t{0}), 256);
  // Equal FLOPs: earlier segments attend to fewer keys, so they are longer.
  EXPECT_TRUE(std::is_sorted(f.rbegin(), f.rend())) << f[0] << " " << f[1] << " " << f[2] << " " << f[3];
  EXPECT_GT(f.front(), f.back());
}

TEST(ParallelConfig, ExplicitFormIsReadAndValidated) {
  const JobConfig j = job(R"({"rank_vstages": [[0], [0], [1]], "layers": [4, 2],
      "schedule_text": ["F0.0 F0.1 F0.2 F0.3 BW0.3 BW0.2 BW0.1 BW0.0 F1.0 F1.1 F1.2 F1.3 BW1.3 BW1.2 BW1.1 BW1.0",
                        "F2.0 F2.1 F2.2 F2.3 BW2.3 BW2.2 BW2.1 BW2.0 F3.0 F3.1 F3.2 F3.3 BW3.3 BW3.2 BW3.1 BW3.0",
                        "F0.0 F0.1 F0.2 F0.3 BW0.3 BW0.2 BW0.1 BW0.0 F2.0 F2.1 F2.2 F2.3 BW2.3 BW2.2 BW2.1 BW2.0 F1.0 F1.1 F1.2 F1.3 BW1.3 BW1.2 BW1.1 BW1.0 F3.0 F3.1 F3.2 F3.3 BW3.3 BW3.2 BW3.1 BW3.0"],
      "schedule_name": "hand-made",
      "devices": [{"type": "a", "slowdown": 2}, {"type": "b", "memory_bytes": 1000000}, {}]})");
  EXPECT_EQ(j.parallel.form, ParallelConfig::Form::explicit_layout);
  EXPECT_EQ(j.global_microbatches(), 4);  // train.microbatches is global here
  const PipelinePlan plan = build_pipeline_plan(j, 3);
  EXPECT_EQ(plan.schedule_name, "hand-made");
  EXPECT_EQ(plan.vstage_layers, (std::vector<int>{4, 2}));
  EXPECT_EQ(plan.devices[0].slowdown, 2.0);
  EXPECT_EQ(plan.devices[1].memory_bytes, 1000000u);
  EXPECT_EQ(plan.rank_label(0), "rank 0: stage 0 (a, x2)");
}

// parallel.recompute reaches every virtual stage's StageSpec, resolved against its layers.
TEST(ParallelConfig, RecomputeIsResolvedPerVirtualStage) {
  const auto counts = [](const std::string& parallel, int world) {
    std::vector<int> out;
    for (const model::StageSpec& s : build_pipeline_plan(job(parallel), world).vstage_specs) {
      out.push_back(s.recompute_layers);
    }
    return out;
  };
  EXPECT_EQ(counts(R"({"pp": 2, "layers": [4, 2]})", 2), (std::vector<int>{0, 0}));
  EXPECT_EQ(counts(R"({"pp": 2, "layers": [4, 2], "recompute": "full"})", 2), (std::vector<int>{4, 2}));
  EXPECT_EQ(counts(R"({"pp": 2, "layers": [4, 2], "recompute": 2})", 2), (std::vector<int>{2, 2}));
  EXPECT_EQ(counts(R"({"schedule": "seq1f1b-i", "pp": 2, "chunks": 2, "recompute": [1, 0, 1, 0]})", 2),
            (std::vector<int>{1, 0, 1, 0}));
}

TEST(ParallelConfig, BadLayoutsAreOneLineNamingFileAndField) {
  EXPECT_EQ(error_of(R"({"pp": 4})", 2),
            "p.json: parallel.pp: the layout needs 4 ranks (pp 4 x dp 1) but the job has 2 (start it "
            "with mpirun -np 4)");
  EXPECT_EQ(error_of(R"({"pp": 2, "layers": [4, 1]})", 2),
            "p.json: parallel.layers: the layers per virtual stage sum to 5, expected model.layers 6");
  EXPECT_EQ(error_of(R"({"pp": 2, "layers": [6]})", 2),
            "p.json: parallel.layers: expected one layer count per virtual stage (2), found 1");
  EXPECT_EQ(error_of(R"({"pp": 3, "layers": [3, 0, 3]})", 3),
            "p.json: parallel.layers: virtual stage 1 has no layers (only the first and last stage "
            "may, holding the embedding or head)");
  EXPECT_EQ(error_of(R"({"schedule": "1f1b", "pp": 2})", 2),
            "p.json: parallel.schedule: 1f1b: schedules whole micro-batches, so segments must be 1 "
            "(got 4); the sequence-level families are seq1f1b, seq1f1b-i, seq-zb, looped-bfs, "
            "interleaved-zb, v-min, v-half, v-zb");
  EXPECT_TRUE(error_of(R"({"schedule": "interleaved", "pp": 2, "chunks": 2})", 2)
                  .starts_with("p.json: parallel.schedule: interleaved: schedules whole micro-batches"));
  // Recompute counts are checked against each virtual stage's layers.
  EXPECT_EQ(error_of(R"({"pp": 2, "layers": [4, 2], "recompute": 3})", 2),
            "p.json: parallel.recompute: virtual stage 1 has 2 layers, cannot recompute 3");
  EXPECT_EQ(error_of(R"({"pp": 2, "recompute": [1, 2, 3]})", 2),
            "p.json: parallel.recompute: expected one layer count per virtual stage (2), found 3");
  // The explicit form: the validator's one-line summary.
  EXPECT_EQ(error_of(R"({"rank_vstages": [[0], [1]], "layers": [3, 3],
                         "schedule_text": ["F0.0 F0.1 F0.2 F0.3", "F0.0 F0.1 F0.2 F0.3"]})", 2)
                .substr(0, 60),
            "p.json: parallel.schedule_text: schedule rule exactly-once: ");
  EXPECT_NE(error_of(R"({"rank_vstages": [[0], [1]], "layers": [3, 3],
                         "schedule_text": ["F0.0 X", "-"]})", 2)
                .find("p.json: parallel.schedule_text[0]: line 1, column 6: "),
            std::string::npos);
}

TEST(ParallelConfig, BadSectionsAreInputErrors) {
  EXPECT_EQ(parse_error(R"({"pp": 2, "pipeline": 2})"), "p.json: parallel.pipeline: unknown field");
  EXPECT_TRUE(parse_error(R"({"schedule": "2f2b"})")
                  .starts_with("p.json: parallel.schedule: unknown schedule '2f2b'; expected one of gpipe"));
  EXPECT_EQ(parse_error(R"({"pp": 2, "devices": [{}]})"),
            "p.json: parallel.devices: expected one device per rank (2), found 1");
  EXPECT_EQ(parse_error(R"({"pp": 1, "devices": [{"slowdown": 0.5}]})"),
            "p.json: parallel.devices[0].slowdown: expected a slow-down factor in [1, 1000], found "
            "0.500000");
  EXPECT_EQ(parse_error(R"({"pp": 1, "split": "fast"})"),
            "p.json: parallel.split: expected \"even\" or \"flops\", found \"fast\"");
  EXPECT_EQ(parse_error(R"({"rank_vstages": [[0]], "layers": [6], "schedule_text": ["F0.0"], "pp": 1})"),
            "p.json: parallel.pp: belongs to the generated form; the explicit form (rank_vstages, "
            "schedule_text) gives the layout and schedule itself");
  EXPECT_EQ(parse_error(R"({"rank_vstages": [[0], [2]], "layers": [3, 3], "schedule_text": ["-", "-"]})"),
            "p.json: parallel.rank_vstages[1]: expected virtual stages in [0, 2) (one per entry of "
            "layers), found 2");
  EXPECT_EQ(parse_error(R"({"rank_vstages": [[0], [1]], "layers": [3, 3], "schedule_text": ["-"]})"),
            "p.json: parallel.schedule_text: expected one string per rank (2 in rank_vstages), found 1");
  EXPECT_EQ(parse_error(R"({"rank_vstages": [[0]], "schedule_text": ["-"]})"),
            "p.json: parallel.layers: required in the explicit form (layers per virtual stage)");
  // A split re-cuts only a segment count, not explicit lengths.
  try {
    parse_job_config(nlohmann::json::parse(
                         R"({"model": {"layers": 2, "hidden": 32, "heads": 4, "vocab": 256, "max_seq": 64},
                             "train": {"steps": 1, "seq": 8, "microbatch_size": 1, "segments": [5, 3]},
                             "parallel": {"split": "flops"}})"),
                     "p.json");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "p.json: parallel.split: applies when train.segments is a count; "
                           "train.segments gives the lengths");
  }
}

// parallel.shard / offload / shard_shares: read, written back, resolved per virtual stage, and
// every bad combination one line naming the file and field.
TEST(ParallelConfig, ShardingIsReadPerStageAndCheckedAgainstTheLayout) {
  const JobConfig j = job(R"({"schedule": "seq1f1b", "pp": 2, "dp": 2, "shard": [3, 1], "offload": [true, false],
    "shard_shares": "memory", "devices": [{"memory_bytes": 100000000, "host_memory_bytes": 1000000000},
      {"memory_bytes": 100000000}, {"memory_bytes": 300000000, "host_memory_bytes": 1000000000},
      {"memory_bytes": 100000000}]})");
  EXPECT_EQ(to_json(j.parallel)["shard"], nlohmann::json::parse("[3, 1]"));
  EXPECT_EQ(to_json(j.parallel)["offload"], nlohmann::json::parse("[true, false]"));
  EXPECT_EQ(to_json(j.parallel)["shard_shares"], "memory");
  EXPECT_EQ(to_json(j.parallel)["devices"][0]["host_memory_bytes"], 1000000000);
  const PipelinePlan plan = build_pipeline_plan(j, 4);
  EXPECT_EQ(plan.vstage_shard, (std::vector<spec::ShardPolicy>{{3, true}, {1, false}}));
  // Stage 0 on ranks 0 and 2, shares 1 : 3 of their memory.
  EXPECT_EQ(plan.shard_bounds(0, 1000), (std::vector<std::int64_t>{0, 240, 1000}));
  EXPECT_EQ(job(R"({"pp": 2, "dp": 2, "shard": 2, "offload": false})").parallel.shard_level(1), 2);

  EXPECT_EQ(error_of(R"({"schedule": "seq1f1b", "pp": 2, "shard": 1})", 2),
            "p.json: parallel.shard: virtual stage 0 is held by one rank, so there is no data-parallel group to "
            "shard it over (level 1); give it 0 (a list with one level per virtual stage)");
  EXPECT_EQ(error_of(R"({"schedule": "seq1f1b", "pp": 2, "dp": 2, "shard": [1, 2, 3]})", 4),
            "p.json: parallel.shard: expected one shard level per virtual stage (2), found 3");
  EXPECT_EQ(error_of(R"({"schedule": "seq1f1b", "pp": 1, "dp": 2, "offload": true})", 2),
            "p.json: parallel.offload: virtual stage 0 is offloaded but rank 0 has no host memory tier; give its "
            "device a host_memory_bytes capacity");
  EXPECT_EQ(error_of(R"({"schedule": "seq1f1b", "pp": 1, "dp": 2, "offload": true,
                        "devices": [{"host_memory_bytes": 1000}, {}]})", 2),
            "p.json: parallel.devices[1].host_memory_bytes: virtual stage 0 is offloaded but rank 1 has no host "
            "memory tier; give its device a host_memory_bytes capacity");
  EXPECT_EQ(error_of(R"({"schedule": "seq1f1b", "pp": 1, "dp": 2, "shard": 1, "shard_shares": "memory"})", 2),
            "p.json: parallel.shard_shares: shards proportional to memory need every holder's memory_bytes; rank 0 "
            "(virtual stage 0) has none");
  EXPECT_EQ(parse_error(R"({"dp": 2, "shard": 4})"),
            "p.json: parallel.shard: expected a ZeRO level 0, 1, 2 or 3 (or a list with one per virtual stage), found 4");
  EXPECT_EQ(parse_error(R"({"dp": 2, "offload": "yes"})"),
            "p.json: parallel.offload: expected true, false, \"none\", \"optimizer\", \"activations\" or \"all\" (or a "
            "list with one per virtual stage), found \"yes\"");
  EXPECT_EQ(parse_error(R"({"dp": 2, "shard_shares": "big"})"),
            "p.json: parallel.shard_shares: expected \"equal\" or \"memory\" (shards proportional to the devices' "
            "memory_bytes), found \"big\"");
  EXPECT_EQ(parse_error(R"({"devices": [{"host_memory_bytes": 0}]})"),
            "p.json: parallel.devices[0].host_memory_bytes: expected an integer in [1, 9223372036854775807], found 0");
}

// parallel.offload's levels: "activations" (a unit's saved activations between its F and its B,
// runtime/activation_offload.h) beside the optimizer state; read per stage, written back as level
// names, resolved into the plan; the device's host link read and written; bad input refused.
TEST(ParallelConfig, OffloadLevelsAndTheHostLink) {
  const JobConfig j = job(R"({"schedule": "seq1f1b", "pp": 2, "dp": 2, "offload": ["activations", "all"],
    "devices": [{"host_memory_bytes": 1000000000, "host_bytes_per_second": 4e9}, {"host_memory_bytes": 1000000000},
      {"host_memory_bytes": 1000000000}, {"host_memory_bytes": 1000000000}]})");
  EXPECT_EQ(j.parallel.offload, (std::vector<bool>{false, true}));
  EXPECT_EQ(j.parallel.offload_activations, (std::vector<bool>{true, true}));
  EXPECT_EQ(to_json(j.parallel)["offload"], nlohmann::json::parse(R"(["activations", "all"])"));
  EXPECT_EQ(to_json(j.parallel)["devices"][0]["host_bytes_per_second"], 4e9);
  EXPECT_EQ(j.parallel.devices[0].host_bytes_per_second, 4e9);
  EXPECT_FALSE(j.parallel.devices[1].host_bytes_per_second);
  const PipelinePlan plan = build_pipeline_plan(j, 4);
  EXPECT_EQ(plan.vstage_offload_activations, (std::vector<bool>{true, true}));
  EXPECT_EQ(plan.vstage_shard, (std::vector<spec::ShardPolicy>{{0, false}, {0, true}}));
  // One level for every stage; true/false keep their meaning (the optimizer state).
  const JobConfig one = job(R"({"pp": 2, "offload": "activations", "devices": [{"host_memory_bytes": 1000}, {"host_memory_bytes": 1000}]})");
  EXPECT_TRUE(one.parallel.activations_offloaded(1));
  EXPECT_FALSE(one.parallel.offloaded(1));
  EXPECT_EQ(to_json(one.parallel)["offload"], "activations");
  EXPECT_EQ(to_json(job(R"({"dp": 2, "offload": "none"})").parallel)["offload"], false);

  EXPECT_EQ(error_of(R"({"schedule": "seq1f1b", "pp": 2, "offload": [false, "activations"]})", 2),
            "p.json: parallel.offload: virtual stage 1 offloads its activations but rank 1 has no host memory tier; "
            "give its device a host_memory_bytes capacity");
  EXPECT_EQ(error_of(R"({"schedule": "seq1f1b", "pp": 2, "offload": ["activations", "none", "all"],
                        "devices": [{"host_memory_bytes": 1000}, {"host_memory_bytes": 1000}]})", 2),
            "p.json: parallel.offload: expected one offload flag per virtual stage (2), found 3");
  EXPECT_EQ(parse_error(R"({"pp": 2, "offload": ["activation"]})"),
            "p.json: parallel.offload: expected true, false, \"none\", \"optimizer\", \"activations\" or \"all\" (or a "
            "list with one per virtual stage), found \"activation\"");
  EXPECT_EQ(parse_error(R"({"devices": [{"host_bytes_per_second": 0}]})"),
            "p.json: parallel.devices[0].host_bytes_per_second: expected a device <-> host bandwidth in bytes per "
            "second in [1e3, 1e15], found 0.000000");
}

TEST(ParallelConfig, TheShippedConfigsParseAndPlan) {
  for (const char* name : {"seq1f1b-pp4.json", "heterogeneous-explicit.json"}) {
    const JobConfig j = load_job_config(std::string(PLAIT_SOURCE_DIR "/configs/") + name);
    EXPECT_NO_THROW(build_pipeline_plan(j, j.parallel.world_size())) << name;
  }
}

}  // namespace
}  // namespace plait::runtime

namespace plait::runtime {
namespace {

// Tensor parallelism in plait train (parallel.tp): each schedule rank is t job ranks; the plan
// records t, halves each stage message, rounds a flops split to multiples of t, and refuses what
// it cannot run in one line naming the file and field.
TEST(ParallelConfig, TensorParallelPlansAndRefusals) {
  const PipelinePlan plan = build_pipeline_plan(job(R"({"pp": 2, "tp": 2, "schedule": "seq1f1b"})"), 4);
  EXPECT_EQ(plan.rank_tensor_parallel, (std::vector<int>{2, 2}));
  EXPECT_EQ(plan.num_ranks(), 2);
  EXPECT_EQ(plan.world_size(), 4);
  for (const model::StageSpec& s : plan.vstage_specs) EXPECT_EQ(s.tensor_parallel, 2);
  // A flops split's lengths are multiples of t (32 tokens, 4 segments).
  const PipelinePlan flops = build_pipeline_plan(job(R"({"pp": 2, "tp": 4, "split": "flops"})"), 8);
  for (std::int64_t len : flops.partition.lengths) EXPECT_EQ(len % 4, 0) << len;
  EXPECT_EQ(error_of(R"({"pp": 2, "tp": 2})", 2),
            "p.json: parallel.pp: the layout needs 4 ranks (pp 2 x dp 1 x tp 2) but the job has 2 (start it with "
            "mpirun -np 4)");
  // Per-stage degrees: schedule rank r holds job ranks [base_r, base_r + t_r), the flops split
  // rounded to the largest degree, the world the sum of the degrees.
  const PipelinePlan mixed = build_pipeline_plan(job(R"({"pp": 2, "tp": [2, 4], "split": "flops"})"), 6);
  EXPECT_EQ(mixed.rank_tensor_parallel, (std::vector<int>{2, 4}));
  EXPECT_EQ(mixed.world_size(), 6);
  EXPECT_EQ(mixed.vstage_specs[0].tensor_parallel, 2);
  EXPECT_EQ(mixed.vstage_specs[1].tensor_parallel, 4);
  for (std::int64_t len : mixed.partition.lengths) EXPECT_EQ(len % 4, 0) << len;
  EXPECT_EQ(mixed.job_rank(1, 3), 5);
  EXPECT_EQ(mixed.schedule_rank_of(1), 0);
  EXPECT_EQ(mixed.schedule_rank_of(2), 1);
  EXPECT_EQ(mixed.tp_rank_of(4), 2);
  EXPECT_EQ(mixed.job_rank_label(3), "1.1");
  EXPECT_EQ(error_of(R"({"pp": 2, "tp": [2, 1]})", 4),
            "p.json: parallel.pp: the layout needs 3 ranks (pp 2 x dp 1, tp by rank 2 + 1) but the job has 4 (start "
            "it with mpirun -np 3)");
  EXPECT_EQ(error_of(R"({"pp": 2, "tp": [2, 3]})", 5),
            "p.json: parallel.tp: degree 2 does not divide the largest, 3 (stages of different degrees reshard their "
            "boundary messages into pieces of 1/max of a segment; use degrees that divide each other, as 1, 2, 4, 8)");
  EXPECT_EQ(error_of(R"({"pp": 2, "tp": [2, 1, 1]})", 3),
            "p.json: parallel.tp: expected one degree for every virtual stage or one per virtual stage (2), found 3");
  // The chunks of one rank run on its one TP group.
  EXPECT_EQ(error_of(R"({"pp": 2, "chunks": 2, "schedule": "seq1f1b-i", "tp": [2, 1, 1, 1]})", 5),
            "p.json: parallel.tp: rank 0 holds virtual stages 0 (degree 2) and 2 (degree 1): the stages of one rank "
            "run on its one tensor-parallel group and need the same degree");
  // 4 heads over 8 ranks; 8-token segments over 16.
  EXPECT_TRUE(error_of(R"({"pp": 1, "tp": 8})", 8)
                  .starts_with("p.json: parallel.tp: tensor parallelism: heads 4 is not divisible by the tensor-parallel "
                               "size 8"));
  const std::string kv = R"({"model": {"family": "llama", "layers": 2, "hidden": 32, "heads": 4, "kv_heads": 2,
      "ffn_hidden": 48, "vocab": 256, "max_seq": 64}, "train": {"steps": 1, "seq": 32, "microbatch_size": 1},
      "parallel": {"tp": 4}})";
  try {
    build_pipeline_plan(parse_job_config(nlohmann::json::parse(kv), "kv.json"), 4);
    ADD_FAILURE() << "kv_heads 2 over 4 ranks";
  } catch (const Error& e) {
    EXPECT_TRUE(std::string(e.what()).starts_with("kv.json: parallel.tp: tensor parallelism: kv_heads 2 is not "
                                                  "divisible by the tensor-parallel size 4"))
        << e.what();
  }
  const std::string odd = R"({"model": {"layers": 2, "hidden": 32, "heads": 4, "vocab": 256, "max_seq": 64},
      "train": {"steps": 1, "seq": 30, "microbatch_size": 1, "segments": 3}, "parallel": {"tp": 4}})";
  try {
    build_pipeline_plan(parse_job_config(nlohmann::json::parse(odd), "odd.json"), 4);
    ADD_FAILURE() << "10-token segments over 4 ranks";
  } catch (const Error& e) {
    EXPECT_TRUE(std::string(e.what()).starts_with("odd.json: parallel.tp: sequence parallelism: segment 0 has 10 "
                                                  "tokens, not divisible by the tensor-parallel size 4"))
        << e.what();
  }
  // With degrees per stage the largest must divide every segment (every stage runs every segment,
  // and a boundary's pieces are 1/max of it), named as with one degree.
  const std::string mixed_odd = R"({"model": {"layers": 2, "hidden": 32, "heads": 4, "vocab": 256, "max_seq": 64},
      "train": {"steps": 1, "seq": 20, "microbatch_size": 1, "segments": 2}, "parallel": {"pp": 2, "tp": [1, 4]}})";
  try {
    build_pipeline_plan(parse_job_config(nlohmann::json::parse(mixed_odd), "mixed.json"), 5);
    ADD_FAILURE() << "10-token segments with a stage of degree 4";
  } catch (const Error& e) {
    EXPECT_TRUE(std::string(e.what()).starts_with("mixed.json: parallel.tp: sequence parallelism: segment 0 has 10 "
                                                  "tokens, not divisible by the tensor-parallel size 4"))
        << e.what();
  }
}

}  // namespace
}  // namespace plait::runtime
