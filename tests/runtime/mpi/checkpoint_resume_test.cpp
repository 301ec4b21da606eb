// Checkpoints, validation and non-finite steps of a distributed training run (runtime/
// training_run.h), on every rank of the job (ctest runs this executable with 2, 4 and 8 ranks):
//
// - Stop at step N and resume gives losses and parameters BIT-IDENTICAL to an uninterrupted run
//   of the same layout: the checkpoint holds the exact fp32 parameters and AdamW moments, the
//   optimizer step count and the data position, and a step is a deterministic function of them.
// - A checkpoint written by pp 4 loads into pp 2 (on two of the four ranks), pp 2 x dp 2 with
//   interleaved chunks and pp 1 x dp 4; the next step's loss matches the pp 4 run's. The
//   parameters are the same, so that loss differs only by the order in which the ranks' unit
//   losses are summed (double; measured <= 2e-16 relative); the step after it also by the
//   reassociation of fp32 gradient sums across the other layout and the double sums of the
//   global norm (measured ~1e-9 relative with eps 1e-3; bound 1e-6).
// - Every tensor of the model is in the checkpoint exactly once, with its two AdamW moments,
//   whatever the replication (data-parallel copies, the tied "wte" on the first and last stage);
//   the files parse as safetensors with a reader written here from the format's description
//   (8-byte little-endian header length, JSON header, F32 data) and hold the trainer's values.
// - The forward-only evaluation through the pipeline gives exactly the training step's loss on
//   the same batch, for every family (local hand-offs of V layouts included).
// - A NaN loss or gradient stops the step on every rank (abort) or skips its update on every
//   rank, parameters and optimizer steps untouched (skip).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mpi_test_session.h"
#include "plait/checkpoint/checkpoint_store.h"
#include "plait/data/fixed_step_source.h"
#include "plait/data/token_shard.h"
#include "plait/model/parameter_layout.h"
#include "plait/model/tensor_shard_copy.h"
#include "plait/runtime/collective_error.h"
#include "plait/runtime/training_checkpoint.h"
#include "plait/runtime/training_run.h"
#include "shared_dir.h"
#include "tiny_job.h"
#include "training_state.h"

namespace plait::runtime {
namespace {

namespace fs = std::filesystem;

comm::Communicator& world() { return plait::test::mpi_session().world(); }

using test::SharedDir;

// Token shards of random byte tokens: a train and a validation split.
void write_shards(const SharedDir& dir) {
  if (world().rank() == 0) {
    std::mt19937_64 rng(21);
    std::uniform_int_distribution<int> token(0, 255);
    std::vector<std::uint16_t> train(6000), val(1200);
    std::filesystem::create_directories(dir / "shards");
    for (auto& t : train) t = static_cast<std::uint16_t>(token(rng));
    for (auto& t : val) t = static_cast<std::uint16_t>(token(rng));
    data::write_token_shard(dir / "shards/r_train_000000.bin", std::span(train).first(4000));
    data::write_token_shard(dir / "shards/r_train_000001.bin", std::span(train).subspan(4000));
    data::write_token_shard(dir / "shards/r_val_000000.bin", val);
  }
  world().barrier();
}

// tiny_job.h's training settings (AdamW eps 1e-3: the file comment) on byte-level shards, with
// validation and a checkpoint every 2 steps.
JobConfig job(const SharedDir& dir, const std::string& schedule, int pp, int dp, int microbatches,
              int segments, int chunks = 0) {
  JobConfig j = test::tiny_job(schedule, pp, dp, microbatches, segments);
  j.run.source = "ckpt-test.json";
  j.run.model = spec::gpt2_model(4, 32, 4, 256, 16);
  j.run.train.steps = 5;
  j.run.train.eval_every = 2;
  j.run.train.eval_batches = 2;
  j.run.data.paths.clear();
  j.run.data.shards = dir / "shards";
  j.run.data.tokenizer = "byte";
  j.run.checkpoint = CheckpointConfig{dir / "ckpt", 2, 0};
  j.parallel.chunks = chunks;
  return j;
}

// Every tensor name of the whole model with its two AdamW moments: what a checkpoint holds once.
std::set<std::string> expected_tensor_names(const spec::ModelSpec& model) {
  std::set<std::string> expected;
  for (const model::NamedTensor& t : model::parameter_layout(model, model::StageSpec::whole_model(model))) {
    for (const char* suffix : {"", ".adam_m", ".adam_v"}) expected.insert(t.name + suffix);
  }
  return expected;
}

struct Outcome {
  std::map<std::int64_t, double> loss, val_loss;
  std::vector<std::vector<float>> state;  // per chunk: parameters, then both moments
  int optimizer_steps = 0;
};

Outcome run(const JobConfig& j, comm::Communicator& w, TrainingRunOptions options = {}) {
  const PipelinePlan plan = build_pipeline_plan(j, w.size());
  MemoryTracker tracker;
  TrainingRun r(j, plan, w, tracker, options);
  Outcome o;
  while (!r.done()) {
    const TrainingStep s = r.next();
    if (s.result) o.loss[s.step] = s.result->loss;
    if (s.val_loss) o.val_loss[s.step] = *s.val_loss;
  }
  o.state = test::training_state(r.trainer());
  o.optimizer_steps = r.trainer().optimizer_steps();
  return o;
}

struct Layout {
  std::string schedule;
  int pp, dp, microbatches, segments, chunks;
  int shard = 0;         // parallel.shard for every stage
  bool offload = false;  // parallel.offload for every stage (a host tier on every rank)
  spec::Precision precision = spec::Precision::fp32;
};

// The layout's parallel section on `j`.
JobConfig& apply_sharding(JobConfig& j, const Layout& l) {
  j.run.train.precision = l.precision;
  if (l.shard == 0 && !l.offload) return j;
  j.parallel.shard = {l.shard};
  j.parallel.offload = {l.offload};
  j.parallel.devices.resize(static_cast<std::size_t>(l.pp * l.dp));
  for (DeviceEmulation& d : j.parallel.devices) d.host_memory_bytes = std::size_t{1} << 30;
  return j;
}

std::vector<Layout> layouts_for(int ranks) {
  // bf16 where the master is where the fp32 weights are not: sharded with the optimizer at
  // level 1, on the host with offload.
  constexpr spec::Precision bf16 = spec::Precision::bf16;
  if (ranks == 2) {
    return {{"seq1f1b", 2, 1, 4, 2, 0}, {"1f1b", 1, 2, 2, 1, 0}, {"1f1b", 1, 2, 2, 1, 0, 3, true},
            {"1f1b", 1, 2, 2, 1, 0, 1, true}, {"1f1b", 1, 2, 2, 1, 0, 1, false, bf16},
            {"1f1b", 1, 2, 2, 1, 0, 2, true, bf16}};
  }
  if (ranks == 4) {
    return {{"seq1f1b", 2, 2, 2, 2, 0}, {"zb-v", 2, 2, 2, 1, 0}, {"seq1f1b", 4, 1, 4, 2, 0},
            {"seq1f1b", 2, 2, 2, 2, 0, 2, false}, {"zb-v", 2, 2, 2, 1, 0, 3, false}};
  }
  return {{"seq1f1b", 4, 2, 2, 2, 0}, {"seq1f1b", 4, 2, 2, 2, 0, 1, true}};
}

TEST(CheckpointResume, StopAndResumeIsBitIdenticalToAnUninterruptedRun) {
  for (const Layout& l : layouts_for(world().size())) {
    SCOPED_TRACE(l.schedule + " pp " + std::to_string(l.pp) + " dp " + std::to_string(l.dp) + " shard " +
                 std::to_string(l.shard) + (l.offload ? " offload" : "") +
                 (l.precision == spec::Precision::bf16 ? " bf16" : ""));
    SharedDir dir("resume");
    write_shards(dir);
    JobConfig j = job(dir, l.schedule, l.pp, l.dp, l.microbatches, l.segments, l.chunks);
    apply_sharding(j, l);
    JobConfig whole = j;
    whole.run.checkpoint->dir = dir / "whole";
    const Outcome uninterrupted = run(whole, world());

    TrainingRunOptions stop;
    stop.stop_at = 3;  // a checkpoint at 2 (every 2) and at 3 (the stop)
    const Outcome first = run(j, world(), stop);
    EXPECT_EQ(first.loss.size(), 3u);
    TrainingRunOptions resume;
    resume.resume = "";  // the config's checkpoint.dir: latest = step 3
    const Outcome second = run(j, world(), resume);
    ASSERT_EQ(second.loss.size(), 2u);

    for (const auto& [step, loss] : uninterrupted.loss) {
      const double got = step < 3 ? first.loss.at(step) : second.loss.at(step);
      EXPECT_EQ(std::memcmp(&got, &loss, sizeof got), 0) << "step " << step << ": " << got << " vs " << loss;
    }
    for (const auto& [step, loss] : uninterrupted.val_loss) {
      const auto& part = step < 3 ? first.val_loss : second.val_loss;
      ASSERT_TRUE(part.contains(step)) << "validation at step " << step;
      EXPECT_EQ(part.at(step), loss) << "validation at step " << step;
    }
    EXPECT_EQ(second.optimizer_steps, 5);
    ASSERT_EQ(second.state.size(), uninterrupted.state.size());
    for (std::size_t c = 0; c < second.state.size(); ++c) {
      ASSERT_EQ(second.state[c].size(), uninterrupted.state[c].size());
      EXPECT_EQ(std::memcmp(second.state[c].data(), uninterrupted.state[c].data(),
                            second.state[c].size() * sizeof(float)),
                0)
          << "chunk " << c << ": parameters or moments differ after resuming";
    }
    // The final checkpoints of both runs hold the same bytes.
    if (world().rank() == 0) {
      const checkpoint::CheckpointReader a(*checkpoint::latest_checkpoint(dir / "whole"));
      const checkpoint::CheckpointReader b(*checkpoint::latest_checkpoint(dir / "ckpt"));
      ASSERT_EQ(a.manifest().files.size(), b.manifest().files.size());
      for (std::size_t f = 0; f < a.manifest().files.size(); ++f) {
        EXPECT_EQ(a.manifest().files[f].crc32c, b.manifest().files[f].crc32c) << a.manifest().files[f].path;
      }
    }
  }
}

// Safetensors as its format describes it, read here without plait's reader.
struct RawTensor {
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};

std::map<std::string, RawTensor> read_safetensors_independently(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_GE(bytes.size(), 8u);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[static_cast<std::size_t>(i)];
  const nlohmann::json header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  std::map<std::string, RawTensor> out;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    EXPECT_EQ(entry.at("dtype"), "F32") << name;
    RawTensor t;
    t.shape = entry.at("shape").get<std::vector<std::int64_t>>();
    const auto offsets = entry.at("data_offsets").get<std::vector<std::uint64_t>>();
    std::int64_t count = 1;
    for (std::int64_t d : t.shape) count *= d;
    EXPECT_EQ(offsets.at(1) - offsets.at(0), static_cast<std::uint64_t>(count) * 4) << name;
    t.values.resize(static_cast<std::size_t>(count));
    std::memcpy(t.values.data(), bytes.data() + 8 + n + offsets[0], t.values.size() * 4);
    out.emplace(name, std::move(t));
  }
  return out;
}

TEST(CheckpointFiles, NameEveryTensorOnceAndOpenWithAnIndependentReader) {
  if (world().size() != 4) GTEST_SKIP() << "uses pp 2 x dp 2 (4 ranks)";
  SharedDir dir("files");
  write_shards(dir);
  // pp 2 x dp 2 and the tied embedding: every stage held twice, "wte" on both stages.
  JobConfig j = job(dir, "seq1f1b", 2, 2, 2, 2);
  j.run.train.steps = 2;
  const PipelinePlan plan = build_pipeline_plan(j, world().size());
  MemoryTracker tracker;
  TrainingRun r(j, plan, world(), tracker, {});
  std::string saved;
  while (!r.done()) {
    const TrainingStep s = r.next();
    if (!s.checkpoint.empty()) saved = s.checkpoint;
  }
  ASSERT_EQ(saved, dir / "ckpt/step_00000002");
  const checkpoint::CheckpointReader reader(saved);
  const std::set<std::string> expected = expected_tensor_names(j.run.model);
  const std::vector<std::string> names = reader.tensor_names();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), expected);
  std::size_t listed = 0;
  ASSERT_EQ(reader.manifest().files.size(), 2u);  // one file per stage, not per replica
  std::map<std::string, RawTensor> all;
  for (const checkpoint::ManifestFile& f : reader.manifest().files) {
    listed += f.tensors.size();
    auto tensors = read_safetensors_independently(saved + "/" + f.path);
    EXPECT_EQ(tensors.size(), f.tensors.size()) << f.path;
    all.merge(tensors);
  }
  EXPECT_EQ(listed, expected.size());  // each tensor in exactly one file
  EXPECT_EQ(reader.manifest().optimizer.at("steps"), 2);
  EXPECT_EQ(reader.manifest().data_position.at("step"), 2);
  EXPECT_EQ(reader.manifest().data_position.at("sample"), 2 * 4 * 2);  // 2 steps of 4 x 2 rows
  // Every rank's tensors, as the files hold them (the head stage's "wte" copy from stage 0's file).
  for (int c = 0; c < r.trainer().num_chunks(); ++c) {
    const model::StageModel& m = r.trainer().chunk(c);
    for (const model::NamedTensor& t : m.tensors()) {
      const RawTensor& raw = all.at(t.name);
      EXPECT_EQ(raw.shape, t.shape) << t.name;
      EXPECT_EQ(std::memcmp(raw.values.data(), m.parameters().data() + t.offset, t.numel * 4), 0) << t.name;
      const RawTensor& moment = all.at(t.name + ".adam_v");
      EXPECT_EQ(std::memcmp(moment.values.data(), r.trainer().optimizer(c).second_moment().data() + t.offset,
                            t.numel * 4),
                0)
          << t.name;
    }
  }
}

// A LLaMA checkpoint carries Hugging Face LlamaForCausalLM's tensor names and (out, in) shapes,
// so its safetensors files load there unchanged: the list below is written out from the Hugging
// Face state dict, not derived from plait's layout.
TEST(CheckpointFiles, LlamaTensorsCarryHuggingFaceNamesAndShapes) {
  if (world().size() != 2) GTEST_SKIP() << "uses pp 2 (2 ranks)";
  SharedDir dir("llama-files");
  write_shards(dir);
  JobConfig j = job(dir, "1f1b", 2, 1, 2, 1);
  j.run.model = test::tiny_job_model(spec::Family::llama, 4);  // 32 wide, 4 heads of 8, 2 kv, ffn 48
  j.run.model.vocab = 256;
  j.run.model.max_seq = 16;
  j.run.train.steps = 2;
  const PipelinePlan plan = build_pipeline_plan(j, world().size());
  MemoryTracker tracker;
  TrainingRun r(j, plan, world(), tracker, {});
  std::string saved;
  while (!r.done()) {
    const TrainingStep s = r.next();
    if (!s.checkpoint.empty()) saved = s.checkpoint;
  }
  if (world().rank() != 0) return;
  std::map<std::string, std::vector<std::int64_t>> hf = {
      {"model.embed_tokens.weight", {256, 32}}, {"model.norm.weight", {32}}, {"lm_head.weight", {256, 32}}};
  for (int l = 0; l < 4; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    hf[p + "input_layernorm.weight"] = {32};
    hf[p + "post_attention_layernorm.weight"] = {32};
    hf[p + "self_attn.q_proj.weight"] = {32, 32};
    hf[p + "self_attn.k_proj.weight"] = {16, 32};  // num_key_value_heads * head_dim = 2 * 8
    hf[p + "self_attn.v_proj.weight"] = {16, 32};
    hf[p + "self_attn.o_proj.weight"] = {32, 32};
    hf[p + "mlp.gate_proj.weight"] = {48, 32};
    hf[p + "mlp.up_proj.weight"] = {48, 32};
    hf[p + "mlp.down_proj.weight"] = {32, 48};
  }
  const checkpoint::CheckpointReader reader(saved);
  std::map<std::string, RawTensor> all;
  for (const checkpoint::ManifestFile& f : reader.manifest().files) {
    all.merge(read_safetensors_independently(saved + "/" + f.path));
  }
  std::map<std::string, std::vector<std::int64_t>> weights;
  for (const auto& [name, raw] : all) {
    if (!name.ends_with(".adam_m") && !name.ends_with(".adam_v")) weights[name] = raw.shape;
  }
  EXPECT_EQ(weights, hf);
}

// A checkpoint of a sharded run holds full tensors by global name (each stage's writer gathers
// its holders' shards), so it loads into any layout and level: written by pp 2 x dp 2 at level 3
// with the optimizer offloaded, resumed by pp 4 (no sharding), pp 1 x dp 4 at level 1 and pp 2 x
// dp 2 at level 2 with the same tolerances as across plain layouts; and its files hold every
// tensor of the model once.
TEST(CheckpointResume, AShardedCheckpointLoadsIntoOtherLayoutsAndLevels) {
  if (world().size() != 4) GTEST_SKIP() << "runs with 4 ranks";
  SharedDir dir("levels");
  write_shards(dir);
  JobConfig source = job(dir, "seq1f1b", 2, 2, 2, 2);
  source.run.train.steps = 4;
  apply_sharding(source, {"seq1f1b", 2, 2, 2, 2, 0, 3, true});
  const Outcome reference = run(source, world());
  {
    const checkpoint::CheckpointReader reader(dir / "ckpt/step_00000002");
    const std::vector<std::string> names = reader.tensor_names();
    EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), expected_tensor_names(source.run.model));
  }
  for (const Layout& l : {Layout{"seq1f1b", 4, 1, 4, 2, 0}, Layout{"seq1f1b", 1, 4, 1, 2, 0, 1, false},
                          Layout{"seq1f1b", 2, 2, 2, 2, 0, 2, false}}) {
    SCOPED_TRACE("pp " + std::to_string(l.pp) + " dp " + std::to_string(l.dp) + " shard " + std::to_string(l.shard));
    JobConfig other = job(dir, l.schedule, l.pp, l.dp, l.microbatches, l.segments, l.chunks);
    apply_sharding(other, l);
    other.run.train.steps = 4;
    other.run.checkpoint.reset();
    TrainingRunOptions options;
    options.resume = dir / "ckpt/step_00000002";
    const Outcome resumed = run(other, world(), options);
    ASSERT_EQ(resumed.loss.size(), 2u);
    EXPECT_LE(std::abs(resumed.loss.at(2) - reference.loss.at(2)) / reference.loss.at(2), 1e-12);
    EXPECT_LE(std::abs(resumed.loss.at(3) - reference.loss.at(3)) / reference.loss.at(3), 1e-6);
  }
}

TEST(CheckpointResume, APipelineOfFourLoadsIntoOtherLayouts) {
  if (world().size() != 4) GTEST_SKIP() << "runs with 4 ranks";
  SharedDir dir("layouts");
  write_shards(dir);
  JobConfig four = job(dir, "seq1f1b", 4, 1, 4, 2);
  four.run.train.steps = 4;
  const Outcome reference = run(four, world());

  struct Target {
    const char* name;
    Layout layout;
    bool two_ranks;  // runs on ranks {0, 1} and, independently, on {2, 3}
  };
  for (const Target& target : {Target{"pp 2", {"seq1f1b", 2, 1, 4, 2, 0}, true},
                               Target{"pp 2 x dp 2, 2 chunks", {"seq1f1b-i", 2, 2, 2, 2, 2}, false},
                               Target{"pp 1 x dp 4", {"seq1f1b", 1, 4, 1, 2, 0}, false}}) {
    SCOPED_TRACE(target.name);
    const Layout& l = target.layout;
    JobConfig other = job(dir, l.schedule, l.pp, l.dp, l.microbatches, l.segments, l.chunks);
    other.run.train.steps = 4;
    other.run.checkpoint.reset();  // nothing saved: only resumed
    TrainingRunOptions options;
    options.resume = dir / "ckpt/step_00000002";
    std::unique_ptr<comm::Communicator> half;
    if (target.two_ranks) {
      auto groups = world().create_groups({{0, 1}, {2, 3}});
      half = std::move(groups[world().rank() < 2 ? 0 : 1]);
    }
    const Outcome resumed = run(other, half ? *half : world(), options);
    ASSERT_EQ(resumed.loss.size(), 2u);
    // Step 2: the same parameters; only the order of the unit losses' sum differs.
    const double first = std::abs(resumed.loss.at(2) - reference.loss.at(2)) / reference.loss.at(2);
    EXPECT_LE(first, 1e-12) << resumed.loss.at(2) << " vs " << reference.loss.at(2);
    const double val = std::abs(resumed.val_loss.at(2) - reference.val_loss.at(2)) / reference.val_loss.at(2);
    EXPECT_LE(val, 1e-12);
    // Step 3: after one update whose gradient sums were ordered differently.
    const double second = std::abs(resumed.loss.at(3) - reference.loss.at(3)) / reference.loss.at(3);
    EXPECT_LE(second, 1e-6) << resumed.loss.at(3) << " vs " << reference.loss.at(3);
    if (world().rank() == 0) {
      std::printf("[ layouts  ] pp 4 -> %s: relative loss difference %.2e (step 2), %.2e (step 3)\n",
                  target.name, first, second);
    }
  }
}


// Tensor parallelism: a checkpoint holds whole tensors by global name (the vocabulary's padding
// to 128 t dropped), so one written at any TP degree loads at any other. Right after the load
// every rank's part of every tensor and of both AdamW moments is bitwise the checkpoint's whole
// tensor cut to that part (what a fresh load of those tensors gives), and the next step's loss
// is the writer's within the reassociation of a differently split step (1e-6; measured ~1e-8).
// TP 2 -> TP 1 and back with 2 ranks; TP 4 -> TP 2 x PP 2, TP 1 x PP 4 and TP 2 -> TP 4 with 4,
// and with degrees per stage (runtime/reshard.h): PP 2 with TP [2, 1] -> [1, 2] and PP 3 x TP 1,
// [1, 2] -> [2, 1] with 3 ranks; TP 2 x PP 2 -> PP 3 with TP [2, 1, 1] with 4.
TEST(CheckpointResume, TensorParallelCheckpointsLoadAtAnyDegree) {
  const int n = world().size();
  if (n != 2 && n != 3 && n != 4) GTEST_SKIP() << "runs with 2, 3 and 4 ranks";
  SharedDir dir("tp");
  write_shards(dir);
  struct Degree {
    int pp;
    std::vector<int> tp;  // one for every stage, or one per stage
    std::string text() const {
      std::string t;
      for (int d : tp) t += (t.empty() ? "" : "/") + std::to_string(d);
      return "tp " + t + " x pp " + std::to_string(pp);
    }
  };
  const auto make = [&](const Degree& d, bool saves) {
    JobConfig j = job(dir, "seq1f1b", d.pp, 1, 4, 2);
    j.run.model.vocab = 300;  // padded to 512 at t = 2 and 4: the padding is exercised
    j.run.train.steps = 4;
    j.parallel.tp = d.tp;
    if (!saves) j.run.checkpoint.reset();
    return j;
  };
  using Cases = std::vector<std::pair<Degree, std::vector<Degree>>>;
  const Cases cases = n == 2   ? Cases{{{1, {2}}, {{2, {1}}, {1, {2}}}}, {{2, {1}}, {{1, {2}}}}}
                      : n == 3 ? Cases{{{2, {2, 1}}, {{2, {1, 2}}, {3, {1}}}}, {{2, {1, 2}}, {{2, {2, 1}}}}}
                               : Cases{{{1, {4}}, {{2, {2}}, {4, {1}}}}, {{2, {2}}, {{1, {4}}, {3, {2, 1, 1}}}}};
  for (const auto& [source, targets] : cases) {
    const Outcome written = run(make(source, true), world());
    const checkpoint::CheckpointReader reader(dir / "ckpt/step_00000002");
    for (const Degree& target : targets) {
      SCOPED_TRACE(source.text() + " -> " + target.text());
      const JobConfig j = make(target, false);
      const PipelinePlan plan = build_pipeline_plan(j, n);
      MemoryTracker tracker;
      TrainingRunOptions options;
      options.resume = dir / "ckpt/step_00000002";
      TrainingRun r(j, plan, world(), tracker, options);
      int mismatched = 0;
      for (int c = 0; c < r.trainer().num_chunks(); ++c) {
        model::StageModel& m = r.trainer().chunk(c);
        const std::span<const float> state[3] = {m.parameters(), r.trainer().optimizer(c).first_moment(),
                                                 r.trainer().optimizer(c).second_moment()};
        for (const model::NamedTensor& t : m.tensors()) {
          int k = 0;
          for (const char* suffix : {"", ".adam_m", ".adam_v"}) {
            std::vector<float> whole(t.full_numel()), part(t.numel);
            reader.read(t.name + suffix, whole);
            if (t.shard.dim < 0) {
              part = whole;
            } else {
              model::copy_shard_out(whole, t, part);
            }
            const std::span<const float> held = state[k++].subspan(t.offset, t.numel);
            if (!std::equal(part.begin(), part.end(), held.begin())) {
              ADD_FAILURE() << "rank " << world().rank() << ": " << t.name << suffix << " differs from the checkpoint";
              ++mismatched;
            }
          }
        }
      }
      EXPECT_EQ(mismatched, 0);
      std::map<std::int64_t, double> loss;
      while (!r.done()) {
        const TrainingStep s = r.next();
        if (s.result) loss[s.step] = s.result->loss;
      }
      ASSERT_EQ(loss.size(), 2u);
      EXPECT_LE(std::abs(loss.at(2) - written.loss.at(2)) / written.loss.at(2), 1e-6)
          << loss.at(2) << " vs " << written.loss.at(2);
    }
    world().barrier();
    if (world().rank() == 0) fs::remove_all(dir / "ckpt");
    world().barrier();
  }
}

TEST(Evaluation, ForwardOnlyPipelineGivesTheTrainingLossOfTheSameBatch) {
  const int n = world().size();
  SharedDir dir("eval");
  write_shards(dir);
  std::vector<Layout> layouts;
  if (n == 2) layouts = {{"seq1f1b", 2, 1, 4, 2, 0}, {"zb-v", 2, 1, 4, 1, 0}, {"interleaved", 2, 1, 4, 1, 2}};
  if (n == 4) layouts = {{"zb-v", 2, 2, 2, 1, 0}, {"seq1f1b", 4, 1, 4, 4, 0}, {"gpipe", 2, 2, 2, 1, 0}};
  if (n == 8) layouts = {{"seq-zb", 4, 2, 2, 2, 0}};
  // With 3 ranks, tensor-parallel degrees per stage: the head at TP 1, then at TP 2 (each of its
  // TP ranks has the whole loss; TP rank 0's counts, in evaluation as in training).
  std::vector<std::vector<int>> degrees(layouts.size());
  if (n == 3) {
    layouts = {{"seq1f1b", 2, 1, 4, 2, 0}, {"1f1b", 2, 1, 4, 1, 0}};
    degrees = {{2, 1}, {1, 2}};
  }
  for (std::size_t i = 0; i < layouts.size(); ++i) {
    const Layout& l = layouts[i];
    SCOPED_TRACE(l.schedule);
    JobConfig j = job(dir, l.schedule, l.pp, l.dp, l.microbatches, l.segments, l.chunks);
    j.parallel.tp = degrees[i];
    j.run.checkpoint.reset();
    const PipelinePlan plan = build_pipeline_plan(j, n);
    MemoryTracker tracker;
    TrainingRun r(j, plan, world(), tracker, {});
    for (int step = 0; step < 2; ++step) {
      const double evaluated = r.trainer().evaluate(step, data::FixedStepSource(r.data().train(), step), 1);
      const DistributedStepResult trained = r.trainer().step(step, r.data().train());
      EXPECT_EQ(evaluated, trained.loss) << "step " << step;
    }
    // Evaluation keeps nothing: activations and K/V are back to zero.
    EXPECT_EQ(tracker.current(MemoryCategory::kActivations), 0u);
    EXPECT_EQ(tracker.current(MemoryCategory::kKVCache), 0u);
  }
}

// With data parallelism the same at level 3 with offload: the norm and the flag come from the
// shards (each rank checks the part it holds reduced), the skip leaves every shard untouched.
TEST(NonFinite, AStepWithANanAbortsOnEveryRankOrIsSkippedOnEveryRank) {
  const int n = world().size();
  SharedDir dir("nonfinite");
  write_shards(dir);
  for (const bool sharded : {false, true}) {
    if (sharded && n < 4) continue;
    SCOPED_TRACE(sharded ? "level 3, offload" : "not sharded");
    JobConfig j = n == 2 ? job(dir, "seq1f1b", 2, 1, 4, 2) : job(dir, "seq1f1b", n / 2, 2, 2, 2);
    if (sharded) apply_sharding(j, {"seq1f1b", n / 2, 2, 2, 2, 0, 3, true});
    j.run.checkpoint.reset();
    j.run.train.eval_every = 0;
    const PipelinePlan plan = build_pipeline_plan(j, n);
    for (const FailureInjection::Kind kind : {FailureInjection::Kind::kNanLoss, FailureInjection::Kind::kNanGradient}) {
      const int culprit = kind == FailureInjection::Kind::kNanLoss ? n - 1 : 0;  // a head / an embedding rank
      TrainingRunOptions options;
      options.trainer.failure = {culprit, 1, kind};
      {
        MemoryTracker tracker;
        TrainingRun r(j, plan, world(), tracker, options);
        r.next();
        try {
          r.next();
          ADD_FAILURE() << "step 1 should have stopped";
        } catch (const NonFiniteStepError& e) {
          const std::string text = e.what();
          EXPECT_NE(text.find("step 1: "), std::string::npos) << text;
          if (kind == FailureInjection::Kind::kNanLoss) {
            EXPECT_NE(text.find("non-finite loss (NaN or infinite) on rank " + std::to_string(culprit)), std::string::npos) << text;
          } else {
            EXPECT_NE(text.find("NaN gradient in wte on stage 0"), std::string::npos) << text;
          }
        }
      }
      JobConfig skipping = j;
      skipping.run.train.on_nonfinite = TrainConfig::OnNonFinite::kSkip;
      MemoryTracker tracker;
      TrainingRun r(skipping, plan, world(), tracker, options);
      r.next();
      const std::vector<std::vector<float>> before = r.trainer().gather_parameters();
      const TrainingStep skipped = r.next();
      ASSERT_TRUE(skipped.result);
      EXPECT_TRUE(skipped.result->skipped);
      EXPECT_FALSE(skipped.result->nonfinite.empty());
      EXPECT_EQ(r.trainer().optimizer_steps(), 1);
      EXPECT_EQ(r.trainer().gather_parameters(), before);
      const TrainingStep after = r.next();  // training goes on
      EXPECT_FALSE(after.result->skipped);
      EXPECT_TRUE(std::isfinite(after.result->loss));
      EXPECT_EQ(r.trainer().optimizer_steps(), 2);
    }
  }
}

// A save refuses state that is not finite (a NaN or infinite parameter or moment, a negative
// second moment, which would make the next update NaN): every rank throws the same error naming
// the tensor, stage and rank, and nothing is written, so the newest checkpoint stays good.
TEST(NonFinite, StateThatIsNotFiniteIsNeverSaved) {
  const int n = world().size();
  SharedDir dir("refuse_save");
  write_shards(dir);
  JobConfig j = n == 2 ? job(dir, "seq1f1b", 2, 1, 4, 2) : job(dir, "seq1f1b", n / 2, 2, 2, 2);
  j.run.train.eval_every = 0;
  const PipelinePlan plan = build_pipeline_plan(j, n);
  MemoryTracker tracker;
  TrainingRun r(j, plan, world(), tracker, {});
  r.next();
  TrainingState state;
  state.step = 1;
  state.config = TrainingRun::config_json(j);
  state.data_position = r.data().state(1);
  state.rng_state = r.data().rng_state();
  const int culprit = n - 1;  // holds the last stage
  const int vstage = plan.schedule.layout.rank_vstages[static_cast<std::size_t>(culprit)].front();
  const auto refused = [&](const std::string& expected) {
    try {
      save_training_checkpoint(r.trainer(), world(), *j.run.checkpoint, state);
      ADD_FAILURE() << "saved";
    } catch (const CollectiveError& e) {
      EXPECT_NE(std::string(e.what()).find("checkpoint of step 1: refusing to save state that is not finite: " + expected),
                std::string::npos)
          << e.what();
    }
    EXPECT_FALSE(fs::exists(dir / "ckpt/step_00000001"));
    for (const auto& e : fs::directory_iterator(dir / "ckpt")) {
      EXPECT_FALSE(e.path().filename().string().starts_with("step_00000001")) << e.path();
    }
  };
  model::StageModel& m = r.trainer().chunk(0);
  const std::size_t at = m.tensors().back().offset;  // on the culprit: its stage's last tensor
  const std::string last = model::parameter_layout(plan.model, plan.vstage_specs[static_cast<std::size_t>(vstage)]).back().name;
  if (world().rank() == culprit) m.parameters()[at] = std::numeric_limits<float>::quiet_NaN();
  refused(last + " on stage " + std::to_string(vstage) + " (rank " + std::to_string(culprit) + ") holds a NaN or infinite value");
  if (world().rank() == culprit) {
    m.parameters()[at] = 0.5f;
    r.trainer().optimizer(0).second_moment()[at] = -1e-3f;
  }
  refused(last + " on stage " + std::to_string(vstage) + " (rank " + std::to_string(culprit) + ") holds a negative second moment (adam_v)");
  if (world().rank() == culprit) r.trainer().optimizer(0).second_moment()[at] = 0;
  EXPECT_NO_THROW(save_training_checkpoint(r.trainer(), world(), *j.run.checkpoint, state));
  EXPECT_TRUE(fs::exists(dir / "ckpt/step_00000001/manifest.json"));
}

}  // namespace
}  // namespace plait::runtime
