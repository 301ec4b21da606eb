#pragma once
// Which checkpoint `plait train --resume [PATH]` continues from (docs/checkpoints.md,
// "Resuming"):
//
//   PATH a step directory   that checkpoint, verified; its errors are final (the user chose it)
//   PATH a checkpoint root  its newest complete checkpoint that verifies; newer ones that do not
//                           (a corrupt file, non-finite values) are skipped, each with the reason,
//                           and `latest` is only a hint (a save stopped before rewriting it
//                           leaves a newer complete checkpoint it does not name)
//   PATH missing, or a root without a complete checkpoint: nothing to resume, start at step 0
//
// "Verifies" means everything a resume relies on: the files' sizes and CRC-32C, the headers
// and tensor lists (CheckpointReader), the step against the directory's name, every tensor
// finite, every AdamW second moment >= 0 (a negative one makes the next update NaN), the
// optimizer record and the data position's step.
#include <memory>
#include <string>
#include <vector>

#include "plait/checkpoint/checkpoint_scan.h"
#include "plait/checkpoint/checkpoint_store.h"
#include "plait/runtime/parallel_config.h"

namespace plait::runtime {

// The checks beyond CheckpointReader's (above). Reads every tensor. Throws InputError naming
// the file and what is wrong.
void verify_training_checkpoint(const checkpoint::CheckpointReader& reader);

struct ResumePoint {
  std::unique_ptr<checkpoint::CheckpointReader> reader;  // null: nothing to resume
  std::string root;         // the checkpoint root: PATH, or the parent of a step directory
  bool named_step = false;  // PATH was the step directory itself
  std::vector<checkpoint::CheckpointScan::Skipped> skipped;  // newer, not verifying, newest first
  // Why `latest` does not name the checkpoint resumed from (a root scan only; "" when it does).
  std::string latest_note;
};

// The rules above. InputError when PATH is a file, or when it holds complete checkpoints of
// which none verifies (saying why for each: resuming at step 0 would not be what was asked).
ResumePoint find_resume_point(const std::string& path);

// The job config a checkpoint was written with (its manifest's "config"), for `plait train
// --resume DIR` without --config: relative data paths resolve against the directory the
// writing run started in (the manifest's working_directory); a checkpoint that does not record
// it is refused if its config has relative paths. checkpoint.dir becomes `root`, where the
// resumed run writes: the directory the user named (or the one holding the step directory
// named), never a path relative to wherever the original run started. Errors name the manifest.
JobConfig job_config_of_checkpoint(const checkpoint::CheckpointReader& reader, const std::string& root);

}  // namespace plait::runtime
