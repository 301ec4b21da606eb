#pragma once
// The tokens a training job reads, built from the config's "data" section (docs/data.md):
//
//   text paths (byte-level)   data::BatchLoader: random windows drawn from (seed, sample), no
//                             position to keep; optional held-out text in data.val_paths
//   token shards              data::SequentialLoader over the directory's *_train_* shards,
//                             llm.c-style sequential windows from a resumable position; the
//                             *_val_* shards are the held-out split. With data.packing
//                             "documents", both splits are packed from whole documents
//                             (data/packed_sequences.h) and the state records the layout
//
// Either way global micro-batch g of step s is a pure function of (s, g), so whichever rank runs
// it fills it. state(s) is the data position a checkpoint taken before step s records; a resumed
// run passes it back and continues the stream exactly, whatever its layout.
//
// The data is identified by content, not by path: state() records the training stream's sources
// ("sources": each shard's file name, tokens and CRC-32C of the whole file, the one its shard
// manifest records; for text one source, the corpus's bytes), and a resume compares them, so a
// dataset moved or linked elsewhere continues while other or changed data is refused.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plait/data/batch_source.h"
#include "plait/data/packed_sequences.h"
#include "plait/data/sequential_loader.h"
#include "plait/data/token_source.h"
#include "plait/runtime/train_config.h"

namespace plait::runtime {

// Where a resumed run's data continues: a checkpoint's data_position and rng_state, and the
// manifest they came from (for messages). `allow_change`: other data than the checkpoint's (by
// content, below) and another seed continue (noted in resume_notes()) instead of being refused.
struct DataResume {
  nlohmann::json data_position;
  nlohmann::json rng_state;
  std::string file;
  bool allow_change = false;
};

// How the sources a checkpoint's data_position records (its "sources"; none in an older plait's:
// "") differ from `sources` (TrainingData's own, in the same form): "" when they are the same,
// else the first difference, for a message. A malformed record is an InputError naming `file`.
std::string data_sources_difference(const nlohmann::json& data_position, const nlohmann::json& sources,
                                   const std::string& file);

class TrainingData {
 public:
  // `global` is the job's global train section (JobConfig::global_train: M micro-batches of
  // B x T). Reads the corpus or opens (and validates) the shards; with train.eval_every > 0 also
  // the held-out split. Errors are InputErrors naming the config file and field, or the shard
  // file and offset.
  TrainingData(const RunConfig& run, const TrainConfig& global,
               const std::optional<DataResume>& resume = std::nullopt);
  ~TrainingData();
  TrainingData(const TrainingData&) = delete;
  TrainingData& operator=(const TrainingData&) = delete;

  // Global micro-batch g of step s (BatchSource::fill).
  const data::BatchSource& train() const { return *train_; }
  // The validation batches (batch r = "step" r, M micro-batches each), or null without
  // evaluation.
  const data::BatchSource* validation() const;
  // Whether the validation loss is due before the update of `step` (step 0, every eval_every
  // steps; the final one after the last step is the caller's).
  bool validation_due(std::int64_t step) const;

  // The checkpoint's data_position and rng_state for a checkpoint taken before `step`.
  nlohmann::json state(std::int64_t step) const;
  nlohmann::json rng_state() const;

  // For the run's header: "3 shards in data/x (1,234,567 tokens, gpt2)".
  std::string describe() const;
  std::string describe_validation() const;
  // What a resume allowed to differ (DataResume::allow_change), one line each.
  const std::vector<std::string>& resume_notes() const { return notes_; }

 private:
  std::string kind_;  // "sequential" (shards) or "random_windows" (text)
  std::uint64_t seed_ = 0;
  std::vector<std::uint16_t> text_tokens_, val_text_tokens_;
  std::unique_ptr<data::TokenSource> train_tokens_, val_tokens_;
  std::unique_ptr<data::PackedSequences> train_packing_, val_packing_;  // data.packing "documents"
  std::unique_ptr<data::BatchSource> train_;
  const data::SequentialLoader* sequential_ = nullptr;  // train_ when it is one
  std::unique_ptr<data::ValidationSet> validation_;
  std::string description_, val_description_;
  nlohmann::json sources_ = nlohmann::json::array();
  std::vector<std::string> notes_;

  // Compares the checkpoint's sources (if it records them) with this run's.
  void check_sources(const RunConfig& run, const DataResume& resume, const std::string& field);
};

}  // namespace plait::runtime
