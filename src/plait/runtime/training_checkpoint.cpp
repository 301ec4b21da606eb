#include "plait/runtime/training_checkpoint.h"

#include "plait/spec/precision_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <vector>

#include "plait/checkpoint/safetensors_file.h"
#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/core/progress.h"
#include "plait/model/parameter_layout.h"
#include "plait/runtime/collective_error.h"
#include "plait/model/tensor_shard_copy.h"
#include "plait/runtime/rank_gather.h"
#include "plait/spec/precision_policy.h"

namespace plait::runtime {
namespace fs = std::filesystem;
namespace {

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
    ShardedChunk& chunk = trainer.data_parallel().chunk(c);
    optim::AdamW& opt = trainer.optimizer(c);
    // The state this rank holds: its part [b, e) of the weights (where the optimizer keeps it)
    // and of both moments (all of the chunk at level 0); each element is checked by one rank.
    const auto b = static_cast<std::size_t>(chunk.shard_begin()), e = static_cast<std::size_t>(chunk.shard_end());
    const std::span<const float> spans[3] = {chunk.shard_parameters(), opt.first_moment(), opt.second_moment()};
    double bad = 0, what = 0;
    const auto& tensors = m.tensors();
    for (std::size_t t = 0; t < tensors.size() && bad == 0; ++t) {
      const std::size_t lo = std::max(tensors[t].offset, b), hi = std::min(tensors[t].offset + tensors[t].numel, e);
      if (lo >= hi) continue;
      for (int k = 0; k < 3 && bad == 0; ++k) {
        for (const float v : spans[k].subspan(lo - b, hi - lo)) {
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
    const auto& stages =
        plan.schedule.layout.rank_vstages[static_cast<std::size_t>(plan.schedule_rank_of(static_cast<int>(r)))];
    for (std::size_t c = 0; 2 * c + 1 < all[r].size(); ++c) {
      const int tensor = static_cast<int>(all[r][2 * c]) - 1;
      const int vstage = stages.at(c);
      if (tensor < 0 || named[static_cast<std::size_t>(vstage)]) continue;
      named[static_cast<std::size_t>(vstage)] = true;
      model::StageSpec spec = plan.vstage_specs[static_cast<std::size_t>(vstage)];
      spec.tp_rank = plan.tp_rank_of(static_cast<int>(r));
      const auto names = model::parameter_layout(plan.model, spec);
      what += std::string(what.empty() ? "" : "; ") + names.at(static_cast<std::size_t>(tensor)).name + " on stage " +
              std::to_string(vstage) + " (rank " + std::to_string(r) + ") holds " +
              kinds[static_cast<int>(all[r][2 * c + 1])];
    }
  }
  throw CollectiveError("checkpoint of step " + std::to_string(step) + ": refusing to save state that is not finite: " +
                        what + "; nothing was written (the previous checkpoint stays the newest)");
}

// A chunk's full weights and AdamW moments on the stage's writer, gathered from the holders'
// shards where they are sharded (docs/checkpoints.md: files hold full tensors by global name).
// The holders' blocks travel as point-to-point messages on the stage's group (tags 0, 1, 2 for
// weights, first and second moment); every holder posts its part for every chunk before any
// waits, so chunks of different groups cannot wait on each other.
struct ChunkImage {
  std::vector<float> parameters, first, second;
};

void post_chunk_gather(ShardedChunk& chunk, comm::Communicator* group, ChunkImage& image,
                       std::vector<comm::Request>& pending) {
  // The master's other holders' shards, where this rank keeps only its own (level 3, bf16 at
  // level >= 1; an offloaded level-0 master is whole on the host: shard_parameters()).
  const bool gather_weights = chunk.master_sharded();
  const bool gather_moments = chunk.policy().level > 0;
  const bool writer = chunk.sharding().index == 0;
  const std::size_t E = chunk.model().parameters().size();
  const std::vector<std::size_t> counts = gather_moments ? chunk.block_counts() : std::vector<std::size_t>{};
  if (writer) {
    image.parameters.resize(E);
    image.first.resize(E);
    image.second.resize(E);
    const std::size_t b = static_cast<std::size_t>(chunk.shard_begin());
    if (!gather_weights) {
      const std::span<const float> p = chunk.model().parameters();
      std::copy(p.begin(), p.end(), image.parameters.begin());
    } else {
      const std::span<const float> p = chunk.shard_parameters();
      std::copy(p.begin(), p.end(), image.parameters.begin() + static_cast<std::ptrdiff_t>(b));
    }
    const std::span<const float> m = chunk.optimizer().first_moment(), v = chunk.optimizer().second_moment();
    std::copy(m.begin(), m.end(), image.first.begin() + static_cast<std::ptrdiff_t>(b));
    std::copy(v.begin(), v.end(), image.second.begin() + static_cast<std::ptrdiff_t>(b));
    std::size_t offset = 0;
    for (int h = 0; h < static_cast<int>(counts.size()); ++h) {
      const std::size_t n = counts[static_cast<std::size_t>(h)];
      if (h > 0 && n > 0) {
        if (gather_weights) pending.push_back(group->irecv(std::span<float>(image.parameters).subspan(offset, n), h, 0));
        pending.push_back(group->irecv(std::span<float>(image.first).subspan(offset, n), h, 1));
        pending.push_back(group->irecv(std::span<float>(image.second).subspan(offset, n), h, 2));
      }
      offset += n;
    }
  } else if (gather_moments && chunk.shard_end() > chunk.shard_begin()) {
    if (gather_weights) pending.push_back(group->isend(chunk.shard_parameters(), 0, 0));
    pending.push_back(group->isend(chunk.optimizer().first_moment(), 0, 1));
    pending.push_back(group->isend(chunk.optimizer().second_moment(), 0, 2));
  }
}

// Tensor parallelism: the stage's WHOLE tensors (weights, first and second moment, by tensor
// index) on TP rank 0 of the writer's group, from every TP rank's part of the stage's state
// (`state`: the rank's flat buffers), sent point to point on the TP group (tags 3, 4, 5). Every
// rank of a TP group holds the same chunks, so they agree on which to send.
struct WholeStage {
  std::vector<std::vector<float>> parameters, first, second;
};

WholeStage gather_tensor_parallel(const PipelinePlan& plan, int vstage, comm::Communicator& group,
                                  const std::span<const float> (&state)[3]) {
  const int t = group.size();
  if (group.rank() != 0) {
    std::vector<comm::Request> pending;
    for (int k = 0; k < 3; ++k) pending.push_back(group.isend(state[k], 0, 3 + k));
    comm::wait_all(pending);
    return {};
  }
  // Each rank's part (all parts have the same size: t divides every split dimension).
  std::vector<std::vector<float>> parts(static_cast<std::size_t>(3 * t));
  std::vector<comm::Request> pending;
  for (int r = 1; r < t; ++r) {
    for (int k = 0; k < 3; ++k) {
      std::vector<float>& part = parts[static_cast<std::size_t>(3 * r + k)];
      part.resize(state[k].size());
      pending.push_back(group.irecv(std::span<float>(part), r, 3 + k));
    }
  }
  comm::wait_all(pending);
  for (int k = 0; k < 3; ++k) parts[static_cast<std::size_t>(k)].assign(state[k].begin(), state[k].end());
  WholeStage whole;
  std::vector<std::vector<float>>* out[3] = {&whole.parameters, &whole.first, &whole.second};
  for (int r = 0; r < t; ++r) {
    model::StageSpec spec = plan.vstage_specs[static_cast<std::size_t>(vstage)];
    spec.tp_rank = r;
    const std::vector<model::NamedTensor> layout = model::parameter_layout(plan.model, spec);
    for (int k = 0; k < 3; ++k) {
      out[k]->resize(layout.size());
      const std::span<const float> part = parts[static_cast<std::size_t>(3 * r + k)];
      for (std::size_t i = 0; i < layout.size(); ++i) {
        std::vector<float>& tensor = (*out[k])[i];
        tensor.resize(layout[i].full_numel());
        model::copy_shard_in(tensor, layout[i], part.subspan(layout[i].offset, layout[i].numel));
      }
    }
  }
  return whole;
}

// bf16: the compute copy of tensor t rounded from its fp32 values, where this rank holds it
// (all of it; at level 3 its shard's part; nothing when level 3 parks it on the host).
void restore_compute_copy(model::StageModel& m, const ShardedChunk& chunk, const model::NamedTensor& t,
                          std::span<const float> values) {
  bf16* copy = m.compute_weight_storage().data();
  if (!chunk.compute_copy_sharded()) {
    m.backend().convert(copy + t.offset, values.data(), t.numel);
    return;
  }
  if (chunk.policy().offload) return;
  const auto b = static_cast<std::size_t>(chunk.shard_begin()), e = static_cast<std::size_t>(chunk.shard_end());
  const std::size_t lo = std::max(t.offset, b), hi = std::min(t.offset + t.numel, e);
  if (lo < hi) m.backend().convert(copy + lo, values.data() + (lo - t.offset), hi - lo);
}

// Copies the part of tensor `t` (whose full values are `values`) that falls in [begin, end) of
// the chunk's buffer into `out`, which holds [begin, end).
void copy_part(const model::NamedTensor& t, std::span<const float> values, std::size_t begin, std::size_t end,
               std::span<float> out) {
  const std::size_t lo = std::max(t.offset, begin), hi = std::min(t.offset + t.numel, end);
  for (std::size_t i = lo; i < hi; ++i) out[i - begin] = values[i - t.offset];
}

// The staging directories' run name from the two int32 rank 0 broadcasts (a 64-bit token).
std::string run_name(const std::int32_t (&token)[2]) {
  std::uint64_t v = 0;
  std::memcpy(&v, token, sizeof v);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

std::string stage_file_name(int vstage) { return "stage_" + std::to_string(vstage) + ".safetensors"; }

std::string save_training_checkpoint(DistributedTrainer& trainer, comm::Communicator& world,
                                     const CheckpointConfig& where, const TrainingState& state,
                                     const FailureInjection& failure) {
  const PipelinePlan& plan = trainer.plan();
  const int rank = world.rank();        // in the job: who creates, gathers and commits
  const int scheduled = trainer.rank();  // in the schedule: which stages it holds
  const std::string what = "checkpoint of step " + std::to_string(state.step);
  note_progress(what + ": checking the state is finite");
  refuse_nonfinite_state(trainer, world, state.step);
  note_progress(what + ": creating its directory");
  // Rank 0 names the staging directory (unique: checkpoint_store.h) and creates it; the
  // broadcast of its name tells every writer it exists.
  std::int32_t token[2] = {0, 0};
  if (rank == 0) {
    const std::uint64_t v = std::stoull(checkpoint::new_checkpoint_run(), nullptr, 16);
    std::memcpy(token, &v, sizeof v);
    checkpoint::begin_checkpoint(where.dir, state.step, run_name(token));
  }
  world.broadcast(std::span<std::int32_t>(token), 0);
  const std::string run = run_name(token);
  const std::string staging = checkpoint::checkpoint_staging_dir(where.dir, state.step, run);

  // Sharded stages: each stage's full state on its writer.
  std::vector<ChunkImage> images(static_cast<std::size_t>(trainer.num_chunks()));
  {
    std::vector<comm::Request> pending;
    for (int c = 0; c < trainer.num_chunks(); ++c) {
      ShardedChunk& chunk = trainer.data_parallel().chunk(c);
      if (chunk.policy().level > 0 || chunk.policy().offload) {
        post_chunk_gather(chunk, trainer.data_parallel().group(c), images[static_cast<std::size_t>(c)], pending);
      }
    }
    comm::wait_all(pending);
  }

  // [vstage, bytes, crc32c] per file this rank writes (exact in doubles: bytes < 2^53).
  std::vector<double> written;
  std::deque<WholeStage> stage_wholes;  // TP: what the written tensors point into
  const auto& vstages = plan.schedule.layout.rank_vstages[static_cast<std::size_t>(scheduled)];
  for (int c = 0; c < trainer.num_chunks(); ++c) {
    const int v = vstages[static_cast<std::size_t>(c)];
    if (!writes(plan, scheduled, v)) continue;
    model::StageModel& m = trainer.chunk(c);
    const ChunkImage& image = images[static_cast<std::size_t>(c)];
    const bool gathered = !image.parameters.empty();
    ShardedChunk& sharded = trainer.data_parallel().chunk(c);
    // A lone holder's master is all of the stage: on the host when offloaded (bf16 keeps no
    // device fp32 copy then), else the device buffer.
    const std::span<const float> p = gathered ? std::span<const float>(image.parameters)
                                   : sharded.master_sharded() ? std::span<const float>(sharded.shard_parameters())
                                                              : std::span<const float>(m.parameters());
    const std::span<const float> first = gathered ? std::span<const float>(image.first) : trainer.optimizer(c).first_moment();
    const std::span<const float> second = gathered ? std::span<const float>(image.second) : trainer.optimizer(c).second_moment();
    std::vector<checkpoint::TensorRef> tensors;
    if (trainer.tensor_parallel() > 1) {
      // Whole tensors from the TP group's parts, written by its TP rank 0 (the padding of the
      // vocabulary dropped): a checkpoint loads into any TP degree.
      const std::span<const float> state[3] = {p, first, second};
      const WholeStage whole = gather_tensor_parallel(plan, v, *trainer.tp_communicator(), state);
      if (trainer.tp_rank() != 0) continue;
      images[static_cast<std::size_t>(c)] = {};
      stage_wholes.push_back(std::move(whole));
      const WholeStage& w = stage_wholes.back();
      for (std::size_t i = 0; i < m.tensors().size(); ++i) {
        const model::NamedTensor& t = m.tensors()[i];
        if (skipped_copy(plan, v, t.name)) continue;
        tensors.push_back({t.name, t.full_shape, w.parameters[i]});
        tensors.push_back({t.name + ".adam_m", t.full_shape, w.first[i]});
        tensors.push_back({t.name + ".adam_v", t.full_shape, w.second[i]});
      }
    } else {
      for (const model::NamedTensor& t : m.tensors()) {
        if (skipped_copy(plan, v, t.name)) continue;
        tensors.push_back({t.name, t.shape, p.subspan(t.offset, t.numel)});
        tensors.push_back({t.name + ".adam_m", t.shape, first.subspan(t.offset, t.numel)});
        tensors.push_back({t.name + ".adam_v", t.shape, second.subspan(t.offset, t.numel)});
      }
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
    const Directory staging_dir = checkpoint::open_checkpoint_staging(staging);
    for (const auto& rank_files : all) {
      for (std::size_t i = 0; i + 2 < rank_files.size(); i += 3) {
        const int v = static_cast<int>(rank_files[i]);
        checkpoint::ManifestFile f;
        f.path = stage_file_name(v);
        f.bytes = static_cast<std::uint64_t>(rank_files[i + 1]);
        f.crc32c = static_cast<std::uint32_t>(rank_files[i + 2]);
        // The names come from the file itself (its header is small), which also proves it parses.
        const checkpoint::SafetensorsReader reader(staging_dir.open_file(f.path), staging_dir.path_of(f.path));
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
    checkpoint::commit_checkpoint(where.dir, manifest, run, where.keep_last, kill_in_commit);
  }
  note_progress(what + ": waiting for the commit");
  world.barrier();  // committed: every rank may now rely on it
  return final_dir;
}

void load_chunk_parameter(DistributedTrainer& trainer, int c, const model::NamedTensor& t,
                          std::span<const float> values) {
  model::StageModel& m = trainer.chunk(c);
  ShardedChunk& chunk = trainer.data_parallel().chunk(c);
  const auto b = static_cast<std::size_t>(chunk.shard_begin()), e = static_cast<std::size_t>(chunk.shard_end());
  if (chunk.device_fp32_whole()) {
    std::copy(values.begin(), values.end(), m.parameters().begin() + static_cast<std::ptrdiff_t>(t.offset));
  }
  copy_part(t, values, b, e, chunk.shard_parameters());
  if (spec::has_compute_copy(m.precision())) restore_compute_copy(m, chunk, t, values);
}

void restore_training_checkpoint(DistributedTrainer& trainer, const checkpoint::CheckpointReader& reader) {
  const std::string manifest = (fs::path(reader.dir()) / "manifest.json").string();
  std::vector<float> values, whole;
  for (int c = 0; c < trainer.num_chunks(); ++c) {
    model::StageModel& m = trainer.chunk(c);
    ShardedChunk& chunk = trainer.data_parallel().chunk(c);
    optim::AdamW& opt = trainer.optimizer(c);
    const std::span<float> first = opt.first_moment();
    const std::span<float> second = opt.second_moment();
    // The moments' shard; the weights go where load_chunk_parameter puts them.
    const auto b = static_cast<std::size_t>(chunk.shard_begin()), e = static_cast<std::size_t>(chunk.shard_end());
    for (const model::NamedTensor& t : m.tensors()) {
      for (const char* suffix : {"", ".adam_m", ".adam_v"}) {
        const std::string name = t.name + suffix;
        if (!reader.has(name)) {
          throw InputError(reader.dir(), "tensor \"" + name + "\"",
                           "not in this checkpoint, which this run's model needs (a checkpoint "
                           "loads only into the model it was written for)");
        }
        const std::vector<std::int64_t> shape = reader.shape(name);
        if (shape != t.full_shape) {
          throw InputError(reader.dir(), "tensor \"" + name + "\"",
                           "expected shape " + checkpoint::shape_text(t.full_shape) + " (this run's model), found " +
                               checkpoint::shape_text(shape));
        }
      }
      // The whole tensor, cut to the rank's part under tensor parallelism (any degree reads any
      // checkpoint: files hold whole tensors).
      const auto read = [&](const std::string& name) {
        if (t.shard.dim < 0) {
          values.resize(t.numel);
          reader.read(name, values);
          return;
        }
        whole.resize(t.full_numel());
        reader.read(name, whole);
        values.resize(t.numel);
        model::copy_shard_out(whole, t, values);
      };
      read(t.name);
      load_chunk_parameter(trainer, c, t, values);
      read(t.name + ".adam_m");
      copy_part(t, values, b, e, first);
      read(t.name + ".adam_v");
      for (std::size_t i = 0; i < t.numel; ++i) {
        if (values[i] < 0) {
          throw InputError(reader.dir(), "tensor \"" + t.name + ".adam_v\"",
                           "element " + std::to_string(i) + " is negative; AdamW's second moment is a "
                           "mean of squares (the next update would be NaN)");
        }
      }
      copy_part(t, values, b, e, second);
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
