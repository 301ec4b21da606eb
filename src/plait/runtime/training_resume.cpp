#include "plait/runtime/training_resume.h"

#include <filesystem>
#include <system_error>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/core/printable_text.h"

namespace plait::runtime {
namespace fs = std::filesystem;
namespace {

std::string manifest_path(const std::string& dir) { return (fs::path(dir) / "manifest.json").string(); }

std::string name_of(const std::string& dir) { return fs::path(dir).filename().string(); }

}  // namespace

void verify_training_checkpoint(const checkpoint::CheckpointReader& reader) {
  const checkpoint::CheckpointManifest& m = reader.manifest();
  const std::string file = manifest_path(reader.dir());
  const JsonFields optimizer(m.optimizer, file, "optimizer");
  if (optimizer.string("name") != "adamw") {
    optimizer.fail("name", "expected \"adamw\", found \"" + printable_text(optimizer.string("name")) + "\"");
  }
  // AdamW's bias-correction count: steps taken, minus skipped non-finite ones.
  optimizer.integer_in("steps", 0, m.step);
  if (m.data_position.is_object() && m.data_position.contains("step")) {
    const JsonFields position(m.data_position, file, "data_position");
    if (const std::int64_t at = position.integer("step"); at != m.step) {
      position.fail("step", "the data position is that of step " + std::to_string(at) +
                                ", but the checkpoint is of step " + std::to_string(m.step));
    }
  }
  std::vector<float> values;
  for (const std::string& name : reader.tensor_names()) {
    std::size_t n = 1;
    for (std::int64_t d : reader.shape(name)) n *= static_cast<std::size_t>(d);
    values.resize(n);
    reader.read(name, values);  // refuses a NaN or an infinity, naming the element
    if (name.ends_with(".adam_v")) {
      for (std::size_t i = 0; i < n; ++i) {
        if (values[i] < 0) {
          throw InputError(reader.dir(), "tensor \"" + name + "\"",
                           "element " + std::to_string(i) + " is " + std::to_string(values[i]) +
                               "; AdamW's second moment is a mean of squares, never negative (the "
                               "next update would be NaN)");
        }
      }
    }
  }
}

ResumePoint find_resume_point(const std::string& path) {
  ResumePoint point;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    point.root = path;
    return point;
  }
  if (!fs::is_directory(path, ec)) {
    throw InputError(path, "(checkpoint)",
                     "is a file; expected a checkpoint directory (with manifest.json) or a checkpoint "
                     "root (with step_<N> directories)");
  }
  if (fs::exists(fs::path(path) / "manifest.json", ec)) {
    point.named_step = true;
    fs::path named = fs::path(path).lexically_normal();
    if (named.filename().empty()) named = named.parent_path();  // "ckpt/step_00000004/"
    const fs::path parent = named.parent_path();
    point.root = parent.empty() ? std::string(".") : parent.string();
    point.reader = std::make_unique<checkpoint::CheckpointReader>(path);
    verify_training_checkpoint(*point.reader);
    return point;
  }
  point.root = path;
  const checkpoint::CheckpointScan scan = checkpoint::scan_checkpoints(path, [&point](const std::string& dir) {
    auto reader = std::make_unique<checkpoint::CheckpointReader>(dir);
    verify_training_checkpoint(*reader);
    point.reader = std::move(reader);
  });
  point.skipped = scan.skipped;
  if (!scan.found && scan.complete > 0) {
    std::string why;
    for (const auto& s : scan.skipped) why += (why.empty() ? "" : "; ") + name_of(s.dir) + ": " + s.why;
    throw InputError(path, "(checkpoints)",
                     "none of its " + std::to_string(scan.complete) + " complete checkpoint(s) verifies (" +
                         why + "); nothing to resume from");
  }
  if (scan.found) {
    const std::string found = name_of(*scan.found);
    if (!scan.latest_problem.empty()) {
      point.latest_note = "latest is unusable (" + scan.latest_problem + ")";
    } else if (!scan.latest) {
      point.latest_note = "there is no latest (a first save stopped before writing it)";
    } else if (name_of(*scan.latest) != found) {
      const std::int64_t named = checkpoint::checkpoint_dir_step(*scan.latest);
      point.latest_note = "latest names " + name_of(*scan.latest) +
                          (named >= 0 && named < checkpoint::checkpoint_dir_step(found)
                               ? ", but " + found + " is newer and complete (a save stopped between "
                                                    "renaming its directory and rewriting latest)"
                               : ", which does not verify");
    }
  }
  return point;
}

JobConfig job_config_of_checkpoint(const checkpoint::CheckpointReader& reader, const std::string& root) {
  const checkpoint::CheckpointManifest& m = reader.manifest();
  const std::string file = manifest_path(reader.dir());
  JobConfig job = parse_job_config(m.config, file + " (config)");
  const auto resolve = [&](std::string& p, const std::string& field) {
    if (p.empty() || fs::path(p).is_absolute()) return;
    if (m.working_directory.empty()) {
      throw InputError(file, "config." + field,
                       "\"" + printable_text(p) + "\" is a relative path, and this checkpoint does not "
                       "record the directory its run started in (an older plait wrote it); give the "
                       "config with --config from that directory");
    }
    p = (fs::path(m.working_directory) / p).lexically_normal().string();
  };
  DataConfig& d = job.run.data;
  for (std::size_t i = 0; i < d.paths.size(); ++i) resolve(d.paths[i], "data.paths[" + std::to_string(i) + "]");
  for (std::size_t i = 0; i < d.val_paths.size(); ++i) {
    resolve(d.val_paths[i], "data.val_paths[" + std::to_string(i) + "]");
  }
  resolve(d.shards, "data.shards");
  if (!job.run.checkpoint) job.run.checkpoint = CheckpointConfig{};
  job.run.checkpoint->dir = root;
  return job;
}

}  // namespace plait::runtime
