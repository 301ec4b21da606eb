#include "plait/runtime/training_data.h"

#include <filesystem>
#include <fstream>
#include <span>

#include "plait/core/crc32c.h"
#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/core/printable_text.h"
#include "plait/data/batch_loader.h"
#include "plait/data/byte_tokenizer.h"
#include "plait/data/document_starts.h"
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
std::vector<data::ShardSetSource::File> shard_files(const RunConfig& run, const std::string& split) {
  return data::shards_to_read(run.data.shards, split, run.data.tokenizer, run.source + " (data.tokenizer)");
}

std::unique_ptr<data::ShardSetSource> open_shards(const RunConfig& run, const std::vector<data::ShardSetSource::File>& files) {
  const DataConfig& d = run.data;
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

// A source of the training stream as a checkpoint records it.
nlohmann::json source_json(const std::string& name, std::int64_t tokens, std::uint32_t crc) {
  return {{"name", name}, {"tokens", tokens}, {"crc32c", crc32c_text(crc)}};
}

// The CRC-32C of a whole file (a shard without a shard manifest), read in blocks.
std::uint32_t file_crc32c(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "(file)", "cannot be read");
  std::vector<char> block(std::size_t{1} << 20);
  std::uint32_t crc = 0;
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    crc = crc32c(std::as_bytes(std::span(block.data(), static_cast<std::size_t>(in.gcount()))), crc);
  }
  return crc;
}

// A source's field of the given type, or null (a manifest is input: it may hold anything).
const nlohmann::json* field_of(const nlohmann::json& s, const char* key, nlohmann::json::value_t type) {
  if (!s.is_object() || !s.contains(key)) return nullptr;
  const nlohmann::json& v = s[key];
  const bool ok = type == nlohmann::json::value_t::number_integer ? v.is_number_integer() : v.type() == type;
  return ok ? &v : nullptr;
}

// "corpus_train_000001.bin (30000 tokens, CRC-32C 0x1a2b3c4d)": what identifies the source, its
// name cut short and made printable.
std::string source_text(const nlohmann::json& s) {
  using T = nlohmann::json::value_t;
  const nlohmann::json* name = field_of(s, "name", T::string);
  const nlohmann::json* tokens = field_of(s, "tokens", T::number_integer);
  const nlohmann::json* crc = field_of(s, "crc32c", T::string);
  return (name ? printable_text(name->get<std::string>(), 60) : std::string("(unnamed)")) + " (" +
         (tokens ? std::to_string(tokens->get<std::int64_t>()) : std::string("?")) + " tokens, CRC-32C " +
         (crc ? printable_text(crc->get<std::string>(), 12) : std::string("?")) + ")";
}

bool same_source(const nlohmann::json& theirs, const nlohmann::json& ours) {
  using T = nlohmann::json::value_t;
  const nlohmann::json* tokens = field_of(theirs, "tokens", T::number_integer);
  const nlohmann::json* crc = field_of(theirs, "crc32c", T::string);
  return tokens && crc && *tokens == ours.at("tokens") && *crc == ours.at("crc32c");
}

// The split's sequences packed from whole documents (data.packing "documents"), or null.
std::unique_ptr<data::PackedSequences> pack_documents(const RunConfig& run, const std::vector<data::ShardSetSource::File>& files,
                                                      const data::TokenSource& source, int seq) {
  if (!run.data.packs_documents()) return nullptr;
  const auto& shards = static_cast<const data::ShardSetSource&>(source);
  const std::optional<std::uint16_t> eot =
      run.data.tokenizer == "gpt2" ? std::optional<std::uint16_t>(data::kGpt2EndOfText) : std::nullopt;
  return std::make_unique<data::PackedSequences>(data::document_starts(files, shards, eot), source.size(), seq);
}

// ", packed from 1,234 whole documents into 567 sequences (3.2% padding)".
std::string packing_text(const data::PackedSequences* p) {
  if (!p) return "";
  char padding[32];
  std::snprintf(padding, sizeof padding, "%.1f%%",
                100.0 * static_cast<double>(p->padding_tokens()) / (static_cast<double>(p->size()) * p->seq()));
  return ", packed from " + thousands(p->document_count()) + " whole documents into " + thousands(p->size()) +
         " sequences (" + padding + " padding)";
}

}  // namespace

std::string data_sources_difference(const nlohmann::json& data_position, const nlohmann::json& sources,
                                   const std::string& file) {
  if (!data_position.is_object() || !data_position.contains("sources")) return "";  // an older plait's
  const nlohmann::json& theirs = data_position["sources"];
  if (!theirs.is_array()) throw InputError(file, "data_position.sources", "expected an array of the data's sources");
  if (theirs.size() != sources.size()) {
    return "the checkpoint's run read " + std::to_string(theirs.size()) + " source(s), this run reads " +
           std::to_string(sources.size());
  }
  for (std::size_t i = 0; i < theirs.size(); ++i) {
    if (!same_source(theirs[i], sources[i])) {
      return "source " + std::to_string(i + 1) + " of " + std::to_string(theirs.size()) + " is " +
             source_text(sources[i]) + " here, but the checkpoint's run read " + source_text(theirs[i]);
    }
  }
  return "";
}

void TrainingData::check_sources(const RunConfig& run, const DataResume& resume, const std::string& field) {
  const std::string problem = data_sources_difference(resume.data_position, sources_, resume.file);
  if (problem.empty()) return;
  if (resume.allow_change) {
    notes_.push_back("data change (--allow-recipe-change): " + problem +
                     "; continuing at the checkpoint's position in this data");
    return;
  }
  throw InputError(run.source, field,
                   problem + ": other data than the checkpoint " + resume.file +
                       " was trained on (data is compared by content, so a moved dataset is fine); give "
                       "the same data, or pass --allow-recipe-change to continue at the same position in this data");
}

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
    // Random windows are drawn from (seed, sample): the seed is the sampler's whole state. It is
    // this run's (train.seed), which must be the checkpoint's unless the change was allowed
    // (resume_recipe.h checks it first, naming the config): honoured or refused, never ignored.
    const JsonFields rng(resume->rng_state, resume->file, "rng_state");
    const auto saved = static_cast<std::uint64_t>(rng.integer_in("seed", 0, INT64_MAX));
    if (saved != seed_ && !resume->allow_change) {
      throw InputError(run.source, "train.seed",
                       std::to_string(seed_) + ", but the checkpoint " + resume->file + " drew from seed " +
                           std::to_string(saved) + "; set it back, or pass --allow-recipe-change to "
                           "continue with the new seed");
    }
  }

  if (d.uses_shards()) {
    const std::vector<data::ShardSetSource::File> files = shard_files(run, "train");
    train_tokens_ = open_shards(run, files);
    const auto& shards = static_cast<const data::ShardSetSource&>(*train_tokens_).shards();
    for (std::size_t i = 0; i < files.size(); ++i) {
      // The shard manifest's CRC-32C, which opening the shard just verified; else the file's own.
      const std::uint32_t crc = files[i].checksum ? files[i].checksum->crc32c : file_crc32c(files[i].path);
      sources_.push_back(source_json(std::filesystem::path(files[i].path).filename().string(),
                                     static_cast<std::int64_t>(shards[i].tokens().size()), crc));
    }
    data::DataPosition start;
    if (position) check_sources(run, *resume, "data.shards");
    train_packing_ = pack_documents(run, files, *train_tokens_, global.seq);
    if (position) {
      nlohmann::json state = resume->data_position;
      state.erase("loader");
      state.erase("sources");
      data::BalanceLayout balance;
      if (d.balances()) {
        balance = {std::int64_t{d.balance_window} * global.microbatches * global.microbatch_size,
                   global.microbatch_size, global.microbatches};
      }
      start = data::SequentialLoader::position_from_state(state, *train_tokens_, global.seq, resume->file,
                                                          train_packing_.get(), balance);
    }
    const data::SequenceBalance balance{d.balances() ? d.balance_window : 0};
    auto loader = std::make_unique<data::SequentialLoader>(
        *train_tokens_, global.seq, global.microbatch_size,
        data::MicrobatchShares({global.microbatches}), start, train_packing_.get(), balance);
    sequential_ = loader.get();
    train_ = std::move(loader);
    description_ = train_tokens_->describe() + ", " + d.tokenizer + " tokens, read in order" +
                   packing_text(train_packing_.get()) +
                   (d.balances() ? ", balanced (wlb, windows of " + std::to_string(d.balance_window) + " steps)" : "");
  } else {
    const data::TextCorpus corpus = data::read_text_corpus(d.paths);
    text_tokens_ = data::ByteTokenizer::encode(corpus.text);
    train_tokens_ = std::make_unique<data::TokenSpanSource>(text_tokens_, "the text corpus");
    sources_.push_back(source_json("the text of " + std::to_string(corpus.files.size()) + " file(s)",
                                   static_cast<std::int64_t>(corpus.text.size()),
                                   crc32c(std::as_bytes(std::span(corpus.text.data(), corpus.text.size())))));
    if (position) {
      check_sources(run, *resume, "data.paths");
      if (position->has("sources")) position->raw("sources");  // checked above
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
      const std::vector<data::ShardSetSource::File> val_files = shard_files(run, "val");
      val_tokens_ = open_shards(run, val_files);
      val_packing_ = pack_documents(run, val_files, *val_tokens_, global.seq);
    } else {
      const data::TextCorpus held_out = data::read_text_corpus(d.val_paths);
      val_text_tokens_ = data::ByteTokenizer::encode(held_out.text);
      val_tokens_ = std::make_unique<data::TokenSpanSource>(val_text_tokens_, "the held-out text");
    }
    validation_ = std::make_unique<data::ValidationSet>(
        *val_tokens_, global.seq, global.microbatch_size,
        data::MicrobatchShares({global.microbatches}), global.eval_every, val_packing_.get());
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
  s["sources"] = sources_;
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
