#pragma once
// `plait data prepare` as a library: text files -> llm.c token shards for a train and a
// validation split.
//
// Files are read in the order list_input_files() gives (links among the inputs followed, and
// listed in the summary), streamed in 1 MiB blocks; files whose first 8000 bytes hold a NUL
// byte are skipped as binary (git's rule), empty files are skipped. Each file is one document:
// with the GPT-2 tokenizer, <|endoftext|> (50256) precedes each document, as llm.c's data
// scripts do; the byte tokenizer has no such token and writes documents back to back.
// The validation split is the first ceil(val_fraction x input bytes) bytes, extended to the end
// of the line holding the last of them (as llm.c's tinyshakespeare.py takes the first tokens for
// validation); the rest is the training split, which must not be empty (InputError naming
// --val-fraction). Shards hold shard_tokens tokens each (the last one fewer) and are named
// <name>_<split>_<index:06d>.bin, each with its document boundary index <...>.docs beside it
// (document_index.h: where the documents start; a file is a document); <name>.lengths.json holds
// the training split's document lengths (document_length_file.h); <name>.shards.json records
// each shard's and index's size and CRC-32C and the tokenizer (shard_manifest.h), written last.
//
// One run at a time per out_dir (DirectoryLock; a second is refused naming the first). Shards
// are written as tokens arrive (memory: the tokenizer's, gpt2_tokenizer.h, plus constant
// blocks) into a staging directory of the run's own, <out>/.<name>.prepare-<16 hex>/, and moved
// into out_dir, never over a file, only once the whole input is done (with overwrite, the old
// shards of that name, their lengths file and their manifest are removed just before); on any error the staging
// directory, every temporary file and whatever was already moved are removed, and old shards of
// the name are kept unless the failure came after their removal.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "plait/data/document_lengths.h"

namespace plait::data {

struct PrepareProgress {
  std::uint64_t bytes_done = 0;
  std::uint64_t bytes_total = 0;
  std::int64_t tokens = 0;
};

struct PrepareOptions {
  std::string tokenizer = "gpt2";  // "byte" or "gpt2"
  std::string vocab_dir;           // gpt2: directory with encoder.json and vocab.bpe
  std::string out_dir;
  std::string name = "corpus";
  std::int64_t shard_tokens = 100'000'000;  // llm.c's fineweb.py shard size
  double val_fraction = 0.1;
  bool overwrite = false;  // replace existing <name>_train_*/<name>_val_* shards in out_dir
  std::function<void(const PrepareProgress&)> progress;  // called after each block, if set
};

struct PrepareSummary {
  std::vector<std::string> files;  // documents read
  std::vector<std::string> skipped;  // empty or binary files
  std::uint64_t input_bytes = 0;
  std::int64_t train_tokens = 0;
  std::int64_t val_tokens = 0;
  // Each split's documents as the loaders see them: a file cut by the validation split is one
  // document in each.
  DocumentLengths train_documents;
  DocumentLengths val_documents;
  std::vector<std::string> train_shards;
  std::vector<std::string> val_shards;
  std::string manifest;  // <out>/<name>.shards.json: each shard's CRC-32C and the tokenizer
  std::string lengths;   // <out>/<name>.lengths.json: the training split's document lengths
  int vocab_size = 0;
  std::vector<std::string> links;    // inputs that are symbolic links: "given -> resolved"
  std::vector<std::string> removed;  // left in --out by runs that ended early, removed
  std::string lock_warning;          // why --out could not be locked (no flock there), or ""
};

PrepareSummary prepare_token_shards(const std::vector<std::string>& inputs,
                                    const PrepareOptions& options);

}  // namespace plait::data
