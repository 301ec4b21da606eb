// `plait data prepare`: text files -> llm.c token shards (train + validation), with the byte
// or GPT-2 tokenizer (docs/data.md).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "plait/cli/commands.h"
#include "plait/cli/gpt2_vocab_dir.h"
#include "plait/data/shard_preparer.h"

namespace plait::cli {
namespace {

double mib(std::uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// The documents of each split (a file is a document; one the validation split cuts counts in
// both) and the training split's lengths in log2 buckets (docs/data.md, "Documents").
void print_documents(const data::PrepareSummary& s) {
  const data::DocumentLengths& t = s.train_documents;
  std::printf("  documents: %lld train (mean %.1f tokens, longest %lld), %lld val\n", static_cast<long long>(t.count),
              t.count ? static_cast<double>(t.tokens) / static_cast<double>(t.count) : 0.0,
              static_cast<long long>(t.longest), static_cast<long long>(s.val_documents.count));
  std::printf("  train document lengths (tokens, log2 buckets):\n");
  for (const std::string& line : t.lines()) std::printf("  %s\n", line.c_str());
  std::printf("  train document lengths, finer (for plait sim/plan --documents histogram:PATH): %s\n",
              s.lengths.c_str());
}

void run_prepare(const data::PrepareOptions& base, const std::vector<std::string>& inputs,
                 bool quiet) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto last_report = start;
  bool reported = false;
  data::PrepareOptions options = base;
  if (!quiet) {
    // Progress on long inputs: one line on stderr, rewritten at most once a second.
    options.progress = [&](const data::PrepareProgress& p) {
      const auto now = Clock::now();
      if (now - last_report < std::chrono::seconds(1)) return;
      last_report = now;
      reported = true;
      const double secs = std::chrono::duration<double>(now - start).count();
      std::fprintf(stderr, "\rprepare: %5.1f%% (%.1f of %.1f MiB), %lld tokens, %.1f MiB/s   ",
                   p.bytes_total ? 100.0 * p.bytes_done / p.bytes_total : 100.0,
                   mib(p.bytes_done), mib(p.bytes_total), static_cast<long long>(p.tokens),
                   mib(p.bytes_done) / secs);
    };
  }
  const data::PrepareSummary s = data::prepare_token_shards(inputs, options);
  if (reported) std::fprintf(stderr, "\n");
  if (!s.lock_warning.empty()) std::fprintf(stderr, "plait: warning: %s\n", s.lock_warning.c_str());
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  const std::int64_t tokens = s.train_tokens + s.val_tokens;
  std::printf("plait data prepare: %zu file(s), %.2f MiB of text -> %lld tokens (%s, vocabulary %d, "
              "%.3f tokens/byte)\n",
              s.files.size(), mib(s.input_bytes), static_cast<long long>(tokens),
              options.tokenizer.c_str(), s.vocab_size,
              s.input_bytes ? static_cast<double>(tokens) / s.input_bytes : 0.0);
  for (const std::string& link : s.links) std::printf("  input %s (a link, followed)\n", link.c_str());
  for (const std::string& name : s.removed) {
    std::printf("  removed %s from %s, left by a run that ended early\n", name.c_str(), options.out_dir.c_str());
  }
  if (!s.skipped.empty()) {
    std::printf("  skipped %zu empty or binary file(s), e.g. %s\n", s.skipped.size(),
                s.skipped.front().c_str());
  }
  const auto split = [](const char* name, std::int64_t n, const std::vector<std::string>& shards) {
    std::printf("  %-5s %lld tokens in %zu shard(s)%s%s\n", name, static_cast<long long>(n),
                shards.size(), shards.empty() ? "" : ": ",
                shards.empty() ? "" : (shards.front() + (shards.size() > 1 ? " ..." : "")).c_str());
  };
  split("train", s.train_tokens, s.train_shards);
  split("val", s.val_tokens, s.val_shards);
  print_documents(s);
  std::printf("  checksums, document indexes and tokenizer: %s\n", s.manifest.c_str());
  std::printf("  %.2f s (%.2f MiB/s)\n", secs, secs > 0 ? mib(s.input_bytes) / secs : 0.0);
}

void register_data_prepare(CLI::App& app) {
  CLI::App* group = command_group(app, "data", "Prepare and inspect training data");
  auto* cmd = group->add_subcommand(
      "prepare",
      "Tokenize text files into llm.c token shards (256-int32 header, uint16 tokens): a train\n"
      "and a validation split, named <name>_train_000000.bin, <name>_val_000000.bin, ..., each\n"
      "with its document boundary index (<...>.docs: where documents start; a file is a\n"
      "document), and <name>.shards.json beside them: each shard's and index's CRC-32C and the\n"
      "tokenizer, which plait train checks as it reads them. One run at a time per --out (a\n"
      "second is refused, naming the first); shards appear there only once all are written, and\n"
      "a failed run leaves nothing behind (docs/data.md)");
  struct Args {
    data::PrepareOptions options;
    std::vector<std::string> inputs;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  args->options.vocab_dir = default_gpt2_vocab_dir();
  cmd->add_option("--tokenizer", args->options.tokenizer,
                  "byte: one token per byte (vocabulary 256); gpt2: GPT-2's BPE (vocabulary\n"
                  "50257), <|endoftext|> before each file")
      ->check(CLI::IsMember({"byte", "gpt2"}))
      ->capture_default_str();
  cmd->add_option("--vocab-dir", args->options.vocab_dir,
                  "Directory holding GPT-2's encoder.json and vocab.bpe\n"
                  "(scripts/fetch-gpt2-tokenizer.sh fetches them; default $PLAIT_GPT2_DIR or\n"
                  "~/.cache/plait/gpt2)")
      ->capture_default_str();
  cmd->add_option("--out", args->options.out_dir, "Output directory (created if missing; not a file)")
      ->required();
  cmd->add_option("--name", args->options.name, "File name prefix of the shards")
      ->capture_default_str();
  cmd->add_option("--shard-tokens", args->options.shard_tokens,
                  "Tokens per shard file (the last one of a split holds the rest)")
      ->capture_default_str();
  cmd->add_option("--val-fraction", args->options.val_fraction,
                  "Fraction of the input bytes, from the start, held out for validation\n"
                  "(cut at the end of a line); 0 writes no validation shards. The training split\n"
                  "must keep at least one token (an error otherwise)")
      ->capture_default_str();
  cmd->add_flag("--overwrite", args->options.overwrite,
                "Replace shards of the same name already in --out (otherwise an error)");
  cmd->add_flag("--quiet", args->quiet, "No progress line on stderr");
  cmd->add_option("inputs", args->inputs,
                  "Text files and directories (read recursively in name order; binary and\n"
                  "empty files are skipped)")
      ->required();
  cmd->callback([args] { run_prepare(args->options, args->inputs, args->quiet); });
}

const CommandRegistration kRegistration(40, register_data_prepare);

}  // namespace
}  // namespace plait::cli
