#include "plait/runtime/training_checkpoint.h"

#include <filesystem>
#include <map>
#include <vector>

#include "plait/checkpoint/safetensors_file.h"
#include "plait/core/error.h"
#include "plait/core/json_fields.h"
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

}  // namespace

std::string stage_file_name(int vstage) { return "stage_" + std::to_string(vstage) + ".safetensors"; }

std::string save_training_checkpoint(DistributedTrainer& trainer, comm::Communicator& world,
                                     const CheckpointConfig& where, const TrainingState& state,
                                     const FailureInjection& failure) {
  const PipelinePlan& plan = trainer.plan();
  const int rank = world.rank();
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
    const checkpoint::ManifestFile f =
        checkpoint::write_checkpoint_file(staging, stage_file_name(v), tensors, metadata);
    written.insert(written.end(), {static_cast<double>(v), static_cast<double>(f.bytes),
                                   static_cast<double>(f.crc32c)});
  }
  if (failure.at(rank, state.step, FailureInjection::Kind::kKillInSave)) {
    kill_self(rank, state.step, "after writing its checkpoint files, before the commit");
  }

  const std::vector<std::vector<double>> all = gather_all(world, written);  // every file is written
  const std::string final_dir = (fs::path(where.dir) / checkpoint::checkpoint_dir_name(state.step)).string();
  if (rank == 0) {
    checkpoint::CheckpointManifest manifest;
    manifest.step = state.step;
    manifest.config = state.config;
    manifest.data_position = state.data_position;
    manifest.rng_state = state.rng_state;
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
    checkpoint::commit_checkpoint(where.dir, manifest, where.keep_last);
  }
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
    }
  }
  const JsonFields optimizer(reader.manifest().optimizer, manifest, "optimizer");
  if (optimizer.string("name") != "adamw") {
    optimizer.fail("name", "expected \"adamw\", found \"" + optimizer.string("name") + "\"");
  }
  trainer.set_optimizer_steps(static_cast<int>(optimizer.integer_in("steps", 0, INT32_MAX)));
}

std::optional<std::string> find_checkpoint(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(fs::path(path) / "manifest.json", ec)) return path;
  if (fs::exists(fs::path(path) / "latest", ec)) return checkpoint::latest_checkpoint(path);
  if (fs::is_directory(path, ec)) {
    // No `latest` yet: none was completed (a first save killed before its rename leaves only a
    // .partial), or the first one was killed between its rename and writing `latest`.
    const std::vector<std::string> complete = checkpoint::list_checkpoints(path);
    if (complete.empty()) return std::nullopt;
    return complete.back();
  }
  throw InputError(path, "(checkpoint)",
                   "expected a checkpoint directory (with manifest.json) or a checkpoint root (with "
                   "latest); it does not exist");
}

}  // namespace plait::runtime
