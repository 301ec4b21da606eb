#pragma once
// Checkpoints on disk, written so that a crash at any moment leaves the last complete one
// loadable:
//
//   <root>/.plait.lock                      the lock of the run writing here (directory_lock.h)
//   <root>/step_00000100/                   a complete checkpoint: manifest.json + its tensor files
//   <root>/step_00000200.partial-<run>/     one being written by run <run> (16 hex digits, unique
//                                           per run; ignored by readers)
//   <root>/latest                           "step_00000100\n": the newest complete checkpoint
//
// Saving step s: (1) the coordinator creates step_s.partial-<run>/; (2) every writer (one per
// pipeline stage, any rank) writes its safetensors file into it with write_checkpoint_file(),
// atomically; (3) the coordinator, once all files are written, calls commit_checkpoint(): it
// checks each file's size, writes manifest.json (atomically), fsyncs the directory, renames
// step_s.partial-<run>/ to step_s/ (never replacing one that exists), fsyncs <root>, then
// replaces `latest` atomically. Until that last rename, `latest` names the previous checkpoint,
// which is untouched.
//
// Everything inside <root> is opened relative to <root>'s descriptor without following links
// (core/directory.h): a symbolic link planted at a step or staging directory, a tensor file,
// `latest` or a temporary name is refused, and its target is never written. <root> itself is
// the user's and may be a link.
//
// Loading (CheckpointReader) verifies every file's size and CRC-32C against the manifest,
// validates each safetensors header, checks the manifest's tensor lists match the files, and
// then serves tensors by global name from whichever file holds them, so a checkpoint written by
// one pipeline layout loads into any other.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "plait/checkpoint/checkpoint_manifest.h"
#include "plait/checkpoint/safetensors_file.h"
#include "plait/core/directory.h"

namespace plait::checkpoint {

// "step_00000100" for step 100.
std::string checkpoint_dir_name(std::int64_t step);
// The step a directory name says: "step_00000100" (or a path ending in it) -> 100; -1 for any
// other name ("step_00000100.partial-...", "step_00000100.aside", "best").
std::int64_t checkpoint_dir_step(const std::string& dir);

// Creates the checkpoint root (and its parents) if missing and opens it; InputError naming it
// when it is a file or cannot be created. A run calls it before training, so that an unusable
// directory is an error at the start, not after the first steps.
Directory create_checkpoint_root(const std::string& root);

// A name for one run's staging directories, the same on every rank of the run (rank 0 draws it
// and shares it): unique_token().
std::string new_checkpoint_run();

// Step 1 (coordinator): creates <root>/step_<s>.partial-<run>/ and returns its path.
std::string begin_checkpoint(const std::string& root, std::int64_t step, const std::string& run);
// The path begin_checkpoint returns (for writers on other ranks of a shared file system).
std::string checkpoint_staging_dir(const std::string& root, std::int64_t step, const std::string& run);

// The staging directory at a path of the form begin_checkpoint returns: its parent (the root)
// opened as the user's, the directory itself without following a link.
Directory open_checkpoint_staging(const std::string& staging_dir);

// Step 2 (any writer): writes one tensor file into the staging directory (a path of the form
// begin_checkpoint returns; the staging directory itself is opened without following a link);
// the returned record goes into the manifest. file_name is a plain name such as
// "stage_0.safetensors"; a file of that name already there is an error, never replaced.
ManifestFile write_checkpoint_file(const std::string& staging_dir, const std::string& file_name,
                                   std::span<const TensorRef> tensors,
                                   const std::map<std::string, std::string>& metadata = {});

// Step 3 (coordinator): publishes the staged checkpoint; manifest.step must be the step given to
// begin_checkpoint and manifest.files must list every file written. Returns the final path.
// An existing step_<s>/ is never replaced (Error: another run wrote it). keep_last > 0 then
// removes all but the newest keep_last complete checkpoints.
// `after_rename`, if set, runs between the rename of the directory and the rewrite of `latest`
// (the fault tests kill the process there).
std::string commit_checkpoint(const std::string& root, const CheckpointManifest& manifest, const std::string& run,
                              int keep_last = 0, const std::function<void()>& after_rename = {});

// What runs that ended during a save left in root: staging directories (step_*.partial*) and
// AtomicFile temporary files. Only for a caller that holds root's lock (DirectoryLock), so
// that no live run's are among them: removes them and returns their names.
std::vector<std::string> remove_abandoned_staging(const std::string& root);

// All of the above in one process: one file per entry of `files`.
struct CheckpointFile {
  std::string name;  // e.g. "stage_0.safetensors"
  std::vector<TensorRef> tensors;
};
// (A run of its own: new_checkpoint_run().)
std::string save_checkpoint(const std::string& root, CheckpointManifest manifest,
                            std::span<const CheckpointFile> files, int keep_last = 0);

// The directory `latest` names, or nullopt if there is no checkpoint yet. Throws InputError if
// `latest` is malformed or names a directory that does not exist.
std::optional<std::string> latest_checkpoint(const std::string& root);

// Complete checkpoints under root, oldest first: directories named step_<digits> (a symbolic
// link of such a name is no checkpoint of plait's and is left out).
std::vector<std::string> list_checkpoints(const std::string& root);

class CheckpointReader {
 public:
  // Opens a checkpoint directory (e.g. latest_checkpoint(root); one the user names may be a link)
  // and verifies it, reading its files without following links: the manifest,
  // the step it records against the directory's name (step_<N>), every file's size and CRC-32C,
  // each safetensors header and the tensor lists.
  explicit CheckpointReader(const std::string& dir);

  const CheckpointManifest& manifest() const { return manifest_; }
  const std::string& dir() const { return dir_; }
  std::vector<std::string> tensor_names() const;  // sorted
  bool has(const std::string& name) const { return where_.contains(name); }
  std::vector<std::int64_t> shape(const std::string& name) const;
  // Copies tensor `name` into out (size must match); InputError naming the checkpoint if absent,
  // or naming the file, tensor and element if a value is not finite (a checkpoint holds the
  // state of a run that trained: a NaN or infinity is damage, never state to continue from).
  void read(const std::string& name, std::span<float> out) const;

 private:
  const SafetensorsEntry& entry(const std::string& name, std::size_t& file) const;
  std::string dir_;
  Directory handle_;
  CheckpointManifest manifest_;
  std::vector<SafetensorsReader> files_;
  std::map<std::string, std::size_t> where_;  // tensor -> index into files_
};

}  // namespace plait::checkpoint
