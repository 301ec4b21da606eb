#include "plait/runtime/training_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <vector>

#include "plait/checkpoint/safetensors_file.h"
#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/core/progress.h"
#include "plait/model/parameter_layout.h"
#include "plait/runtime/collective_error.h"
#include "plait/runtime/rank_gather.h"

namespace plait::runtime {
namespace fs = std::filesystem;
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Whether the rank writes this chunk's file: it is the stage's lowest holder.
bool writes(const PipelinePlan& plan, int rank, int vstage) {
  return plan.holders(vstage).front() == rank;
}

// The head stage's copy of the tied embedding table is stage 0's tensor (equal after every
// step): written once.
bool skipped_copy(const PipelinePlan& plan, int vstage, const std::string& name) {
  return plan.tied_table_split() && vstage != 0 && name == model::embedding_tensor_name(plan.model);
}

// Per rank: [per chunk: 1 + first bad tensor of the chunk's state (0: none), what is wrong].
// What is wrong: 1 NaN/infinite parameter, 2 first moment, 3 second moment, 4 negative second
// moment. Every rank gathers all and builds the same message.
void refuse_nonfinite_state(DistributedTrainer& trainer, comm::Communicator& world, std::int64_t step) {
  std::vector<double> mine;
  bool any = false;
  for (int c = 0; c < trainer.num_chunks(); ++c) {
    model::StageModel& m = trainer.chunk(c);
    optim::AdamW& opt = trainer.optimizer(c);
    const std::span<const float> spans[3] = {m.parameters(), opt.first_moment(), opt.second_moment()};
    double bad = 0, what = 0;
    const auto& tensors = m.tensors();
    for (std::size_t t = 0; t < tensors.size() && bad == 0; ++t) {
      for (int k = 0; k < 3 && bad == 0; ++k) {
        for (const float v : spans[k].subspan(tensors[t].offset, tensors[t].numel)) {
          if (!std::isfinite(v) || (k == 2 && v < 0)) {
            bad = static_cast<double>(t) + 1;
            what = std::isfinite(v) ? 4 : k + 1;
            break;
          }
        }
      }
    }
    any = any || bad != 0;
    mine.insert(mine.end(), {bad, what});
  }
  // One flag first: the gather below runs only when something is wrong.
  if (world.allreduce(any ? 1.0 : 0.0, comm::ReduceOp::kSum) == 0) return;
  const std::vector<std::vector<double>> all = gather_all(world, mine);
  const PipelinePlan& plan = trainer.plan();
  const char* kinds[] = {"", "a NaN or infinite value", "a NaN or infinite first moment (adam_m)",
                         "a NaN or infinite second moment (adam_v)", "a negative second moment (adam_v)"};
  std::vector<bool> named(static_cast<std::size_t>(plan.num_vstages()), false);
  std::string what;
  for (std::size_t r = 0; r < all.size(); ++r) {
    const auto& stages = plan.schedule.layout.rank_vstages[r];
    for (std::size_t c = 0; 2 * c + 1 < all[r].size(); ++c) {
      const int tensor = static_cast<int>(all[r][2 * c]) - 1;
      const int vstage = stages.at(c);
      if (tensor < 0 || named[static_cast<std::size_t>(vstage)]) continue;
      named[static_cast<std::size_t>(vstage)] = true;
      const auto names = model::parameter_layout(plan.model, plan.vstage_specs[static_cast<std::size_t>(vstage)]);
      what += std::string(what.empty() ? "" : "; ") + names.at(static_cast<std::size_t>(tensor)).name + " on stage " +
              std::to_string(vstage) + " (rank " + std::to_string(r) + ") holds " +
              kinds[static_cast<int>(all[r][2 * c + 1])];
    }
  }
  throw CollectiveError("checkpoint of step " + std::to_string(step) + ": refusing to save state that is not finite: " +
                        what + "; nothing was written (the previous checkpoint stays the newest)");
}

}  // namespace

std::string stage_file_name(int vstage) { return "stage_" + std::to_string(vstage) + ".safetensors"; }

std::string save_training_checkpoint(DistributedTrainer& trainer, comm::Communicator& world,
                                     const CheckpointConfig& where, const TrainingState& state,
                                     const FailureInjection& failure) {
  const PipelinePlan& plan = trainer.plan();
  const int rank = world.rank();
  const std::string what = "checkpoint of step " + std::to_string(state.step);
  note_progress(what + ": checking the state is finite");
  refuse_nonfinite_state(trainer, world, state.step);
  note_progress(what + ": creating its directory");
  if (rank == 0) checkpoint::begin_checkpoint(where.dir, state.step);
  world.barrier();  // the staging directory exists
  const std::string staging = checkpoint::checkpoint_staging_dir(where.dir, state.step);

  // [vstage, bytes, crc32c] per file this rank writes (exact in doubles: bytes < 2^53).
  std::vector<double> written;
  const auto& vstages = plan.schedule.layout.rank_vstages[static_cast<std::size_t>(rank)];
  for (int c = 0; c < trainer.num_chunks(); ++c) {
    const int v = vstages[static_cast<std::size_t>(c)];
    if (!writes(plan, rank, v)) continue;
    model::StageModel& m = trainer.chunk(c);
    optim::AdamW& opt = trainer.optimizer(c);
    const std::span<const float> p = m.parameters();
    const std::span<const float> first = opt.first_moment();
    const std::span<const float> second = opt.second_moment();
    std::vector<checkpoint::TensorRef> tensors;
    for (const model::NamedTensor& t : m.tensors()) {
      if (skipped_copy(plan, v, t.name)) continue;
      tensors.push_back({t.name, t.shape, p.subspan(t.offset, t.numel)});
      tensors.push_back({t.name + ".adam_m", t.shape, first.subspan(t.offset, t.numel)});
      tensors.push_back({t.name + ".adam_v", t.shape, second.subspan(t.offset, t.numel)});
    }
    const model::StageSpec& spec = m.spec();
    const std::map<std::string, std::string> metadata = {
        {"format", "plait"},
        {"virtual_stage", std::to_string(v)},
        {"layers", "[" + std::to_string(spec.first_layer) + ", " + std::to_string(spec.last_layer) + ")"},
    };
    note_progress(what + ": writing " + stage_file_name(v));
    const checkpoint::ManifestFile f =
        checkpoint::write_checkpoint_file(staging, stage_file_name(v), tensors, metadata);
    written.insert(written.end(), {static_cast<double>(v), static_cast<double>(f.bytes),
                                   static_cast<double>(f.crc32c)});
  }
  if (failure.at(rank, state.step, FailureInjection::Kind::kKillInSave)) {
    kill_self(rank, state.step, "after writing its checkpoint files, before the commit");
  }

  note_progress(what + ": gathering every rank's files");
  const std::vector<std::vector<double>> all = gather_all(world, written);  // every file is written
  const std::string final_dir = (fs::path(where.dir) / checkpoint::checkpoint_dir_name(state.step)).string();
  if (rank == 0) {
    checkpoint::CheckpointManifest manifest;
    manifest.step = state.step;
    manifest.config = state.config;
    manifest.data_position = state.data_position;
    manifest.rng_state = state.rng_state;
    manifest.working_directory = state.working_directory;
    const optim::AdamWConfig& adam = trainer.optimizer(0).config();
    manifest.optimizer = {{"name", "adamw"},
                          {"steps", trainer.optimizer_steps()},
                          {"beta1", adam.beta1},
                          {"beta2", adam.beta2},
                          {"eps", adam.eps},
                          {"weight_decay", adam.weight_decay}};
    std::map<int, checkpoint::ManifestFile> files;
    for (const auto& rank_files : all) {
      for (std::size_t i = 0; i + 2 < rank_files.size(); i += 3) {
        const int v = static_cast<int>(rank_files[i]);
        checkpoint::ManifestFile f;
        f.path = stage_file_name(v);
        f.bytes = static_cast<std::uint64_t>(rank_files[i + 1]);
        f.crc32c = static_cast<std::uint32_t>(rank_files[i + 2]);
        // The names come from the file itself (its header is small), which also proves it parses.
        const checkpoint::SafetensorsReader reader((fs::path(staging) / f.path).string());
        for (const checkpoint::SafetensorsEntry& e : reader.header().tensors) f.tensors.push_back(e.name);
        files.emplace(v, std::move(f));
      }
    }
    if (static_cast<int>(files.size()) != plan.num_vstages()) {
      throw Error("checkpoint step " + std::to_string(state.step) + ": " + std::to_string(files.size()) +
                  " stage files were written, expected " + std::to_string(plan.num_vstages()));
    }
    for (auto& [v, f] : files) manifest.files.push_back(std::move(f));
    const auto kill_in_commit = [&] {
      if (failure.at(rank, state.step, FailureInjection::Kind::kKillInCommit)) {
        kill_self(rank, state.step, "after renaming the checkpoint's directory, before rewriting latest");
      }
    };
    note_progress(what + ": committing it");
    checkpoint::commit_checkpoint(where.dir, manifest, where.keep_last, kill_in_commit);
  }
  note_progress(what + ": waiting for the commit");
  world.barrier();  // committed: every rank may now rely on it
  return final_dir;
}

void restore_training_checkpoint(DistributedTrainer& trainer, const checkpoint::CheckpointReader& reader) {
  const std::string manifest = (fs::path(reader.dir()) / "manifest.json").string();
  for (int c = 0; c < trainer.num_chunks(); ++c) {
    model::StageModel& m = trainer.chunk(c);
    optim::AdamW& opt = trainer.optimizer(c);
    const std::span<float> p = m.parameters();
    const std::span<float> first = opt.first_moment();
    const std::span<float> second = opt.second_moment();
    for (const model::NamedTensor& t : m.tensors()) {
      for (const char* suffix : {"", ".adam_m", ".adam_v"}) {
        const std::string name = t.name + suffix;
        if (!reader.has(name)) {
          throw InputError(reader.dir(), "tensor \"" + name + "\"",
                           "not in this checkpoint, which this run's model needs (a checkpoint "
                           "loads only into the model it was written for)");
        }
        const std::vector<std::int64_t> shape = reader.shape(name);
        if (shape != t.shape) {
          throw InputError(reader.dir(), "tensor \"" + name + "\"",
                           "expected shape " + shape_text(t.shape) + " (this run's model), found " +
                               shape_text(shape));
        }
      }
      reader.read(t.name, p.subspan(t.offset, t.numel));
      reader.read(t.name + ".adam_m", first.subspan(t.offset, t.numel));
      reader.read(t.name + ".adam_v", second.subspan(t.offset, t.numel));
      for (std::size_t i = 0; i < t.numel; ++i) {
        if (second[t.offset + i] < 0) {
          throw InputError(reader.dir(), "tensor \"" + t.name + ".adam_v\"",
                           "element " + std::to_string(i) + " is negative; AdamW's second moment is a "
                           "mean of squares (the next update would be NaN)");
        }
      }
    }
  }
  const JsonFields optimizer(reader.manifest().optimizer, manifest, "optimizer");
  if (optimizer.string("name") != "adamw") {
    optimizer.fail("name", "expected \"adamw\", found \"" + optimizer.string("name") + "\"");
  }
  trainer.set_optimizer_steps(static_cast<int>(
      optimizer.integer_in("steps", 0, std::min<std::int64_t>(INT32_MAX, reader.manifest().step))));
}

}  // namespace plait::runtime
