#include "plait/runtime/training_data.h"

#include <filesystem>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/data/batch_loader.h"
#include "plait/data/byte_tokenizer.h"
#include "plait/data/microbatch_shares.h"
#include "plait/data/shard_manifest.h"
#include "plait/data/text_corpus.h"

namespace plait::runtime {
namespace {

constexpr const char* kSequential = "sequential";
constexpr const char* kRandomWindows = "random_windows";

std::string kind_text(const std::string& kind) {
  return kind == kSequential ? "token shards in order (sequential)" : "text as random windows";
}

std::string thousands(std::int64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<std::size_t>(i), ",");
  return s;
}

// The split's shards, each checked against the shard manifest beside them (its CRC-32C, the
// tokenizer that wrote them) when there is one. Shards without a manifest (llm.c's own) are
// read unverified; declared GPT-2 but holding only ids below 256 they are byte-level shards
// (GPT-2 text always has merged tokens, and plait's shards an <|endoftext|> per document).
std::unique_ptr<data::ShardSetSource> open_shards(const RunConfig& run, const std::string& split) {
  const DataConfig& d = run.data;
  const std::vector<data::ShardSetSource::File> files =
      data::shards_to_read(d.shards, split, d.tokenizer, run.source + " (data.tokenizer)");
  auto source = std::make_unique<data::ShardSetSource>(files, d.vocab_size());
  bool verified = false;
  for (const auto& f : files) verified = verified || f.checksum.has_value();
  constexpr std::int64_t kEnoughToTell = 1024;
  if (!verified && d.tokenizer == "gpt2" && source->size() >= kEnoughToTell && source->max_token() < 256) {
    throw InputError(run.source, "data.tokenizer",
                     "\"gpt2\", but every one of the " + std::to_string(source->size()) + " tokens of " +
                         source->describe() + " is below 256: byte-level shards (plait data prepare "
                         "--tokenizer byte); declare \"byte\" or prepare them with --tokenizer gpt2");
  }
  return source;
}

}  // namespace

TrainingData::TrainingData(const RunConfig& run, const TrainConfig& global,
                           const std::optional<DataResume>& resume)
    : kind_(run.data.uses_shards() ? kSequential : kRandomWindows), seed_(global.seed) {
  const DataConfig& d = run.data;
  std::optional<JsonFields> position;
  if (resume) {
    position.emplace(resume->data_position, resume->file, "data_position");
    const std::string loader = position->string("loader");
    if (loader != kind_) {
      position->fail("loader", "the checkpoint's run read " + kind_text(loader) + ", this run reads " +
                                   kind_text(kind_) + " (data section of " + run.source +
                                   "); resuming would not continue its data");
    }
    // Random windows are drawn from (seed, sample): the seed is the sampler's whole state.
    const JsonFields rng(resume->rng_state, resume->file, "rng_state");
    seed_ = static_cast<std::uint64_t>(rng.integer_in("seed", 0, INT64_MAX));
  }

  if (d.uses_shards()) {
    train_tokens_ = open_shards(run, "train");
    data::DataPosition start;
    if (position) {
      nlohmann::json state = resume->data_position;
      state.erase("loader");
      start = data::SequentialLoader::position_from_state(state, *train_tokens_, global.seq, resume->file);
    }
    auto loader = std::make_unique<data::SequentialLoader>(
        *train_tokens_, global.seq, global.microbatch_size,
        data::MicrobatchShares({global.microbatches}), start);
    sequential_ = loader.get();
    train_ = std::move(loader);
    description_ = train_tokens_->describe() + ", " + d.tokenizer + " tokens, read in order";
  } else {
    const data::TextCorpus corpus = data::read_text_corpus(d.paths);
    text_tokens_ = data::ByteTokenizer::encode(corpus.text);
    train_tokens_ = std::make_unique<data::TokenSpanSource>(text_tokens_, "the text corpus");
    if (position) {
      const std::int64_t tokens = position->integer("stream_tokens");
      if (tokens != train_tokens_->size()) {
        position->fail("stream_tokens", "the checkpoint's corpus had " + std::to_string(tokens) +
                                            " tokens, this run's has " +
                                            std::to_string(train_tokens_->size()) +
                                            " (data.paths); is it the same data?");
      }
      position->integer("step");
      position->check_no_unknown_fields();
    }
    train_ = std::make_unique<data::BatchLoader>(text_tokens_, global.seq, global.microbatch_size,
                                                 global.microbatches, seed_);
    description_ = std::to_string(corpus.files.size()) + " file(s) under " + d.paths.front() +
                   (d.paths.size() > 1 ? " ..." : "") + ", " + thousands(train_tokens_->size()) +
                   " byte-level tokens, random windows";
  }

  if (global.eval_every > 0) {
    if (d.uses_shards()) {
      if (!std::filesystem::is_directory(d.shards)) {
        throw InputError(run.source, "data.shards",
                         "validation (train.eval_every) needs the held-out split: a directory with "
                         "*_val_* shards, found the single file " + d.shards);
      }
      try {
        data::find_token_shards(d.shards, "val");
      } catch (const InputError&) {
        throw InputError(run.source, "data.shards",
                         "no validation shards (*_val_*.bin) in " + d.shards +
                             "; prepare them with plait data prepare --val-fraction > 0, or set "
                             "train.eval_every to 0");
      }
      val_tokens_ = open_shards(run, "val");
    } else {
      const data::TextCorpus held_out = data::read_text_corpus(d.val_paths);
      val_text_tokens_ = data::ByteTokenizer::encode(held_out.text);
      val_tokens_ = std::make_unique<data::TokenSpanSource>(val_text_tokens_, "the held-out text");
    }
    validation_ = std::make_unique<data::ValidationSet>(
        *val_tokens_, global.seq, global.microbatch_size,
        data::MicrobatchShares({global.microbatches}), global.eval_every);
    const std::int64_t samples = std::int64_t{global.eval_batches} * global.microbatches *
                                 global.microbatch_size;
    const std::int64_t windows = validation_->loader().samples_per_epoch();
    val_description_ = val_tokens_->describe() + ": " + thousands(samples) + " sequences every " +
                       std::to_string(global.eval_every) + " steps" +
                       (samples > windows ? " (the split has only " + thousands(windows) +
                                                " windows: some repeat)"
                                          : "");
  }
}

TrainingData::~TrainingData() = default;

const data::BatchSource* TrainingData::validation() const {
  return validation_ ? &validation_->loader() : nullptr;
}

bool TrainingData::validation_due(std::int64_t step) const {
  return validation_ && validation_->due(step, -1);
}

nlohmann::json TrainingData::state(std::int64_t step) const {
  nlohmann::json s;
  if (sequential_) {
    s = sequential_->state(step);
  } else {
    s = {{"step", step}, {"stream_tokens", train_tokens_->size()}};
  }
  s["loader"] = kind_;
  return s;
}

nlohmann::json TrainingData::rng_state() const {
  // Every random number plait draws is counter-based: parameters from (seed, tensor name,
  // element), random windows from (seed, sample) (core/splitmix64.h); there is no generator
  // state to save beyond the seed.
  return {{"seed", seed_}, {"generator", "splitmix64, counter-based"}};
}

std::string TrainingData::describe() const { return description_; }
std::string TrainingData::describe_validation() const { return val_description_; }

}  // namespace plait::runtime
