// `plait generate`: text from a trained checkpoint (or a Hugging Face directory), decoded with
// the K/V cache (runtime/generation.h, docs/engine.md "Generation").
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "plait/checkpoint/checkpoint_store.h"
#include "plait/cli/commands.h"
#include "plait/cli/flag_values.h"
#include "plait/cli/gpt2_vocab_dir.h"
#include "plait/core/error.h"
#include "plait/core/memory_tracker.h"
#include "plait/data/byte_tokenizer.h"
#include "plait/data/gpt2_tokenizer.h"
#include "plait/data/hf_tokenizer_json.h"
#include "plait/runtime/generation.h"
#include "plait/runtime/hf_export.h"
#include "plait/runtime/hf_import.h"
#include "plait/runtime/training_resume.h"

namespace plait::cli {
namespace {

namespace fs = std::filesystem;

struct GenerateArgs {
  std::string checkpoint, hf, prompt;
  std::string tokens = "64", temperature = "1.0", top_k = "0", top_p = "1.0", seed = "1234", threads;
  std::string vocab_dir = default_gpt2_vocab_dir();
  bool cache_only = false;
};

// Text <-> ids with the tokenizer the model was trained with.
class Tokens {
 public:
  static Tokens byte() { return Tokens(); }
  static Tokens gpt2(data::Gpt2Tokenizer t) {
    Tokens k;
    k.gpt2_ = std::make_unique<data::Gpt2Tokenizer>(std::move(t));
    return k;
  }
  std::vector<std::int32_t> encode(const std::string& text) const {
    const std::vector<std::uint16_t> ids = gpt2_ ? gpt2_->encode(text) : data::ByteTokenizer::encode(text);
    return {ids.begin(), ids.end()};
  }
  std::string decode(const std::vector<std::int32_t>& ids) const {
    std::vector<std::uint16_t> narrow;
    for (std::int32_t id : ids) {
      if (id < 0 || id > 65535 || (gpt2_ && id >= gpt2_->vocab_size())) {
        narrow.clear();
        break;  // an id past the tokenizer (a padded vocabulary's row): shown as ids below
      }
      narrow.push_back(static_cast<std::uint16_t>(id));
    }
    if (narrow.size() != ids.size() || (!gpt2_ && std::any_of(ids.begin(), ids.end(), [](int id) { return id > 255; }))) {
      std::string s = "[ids";
      for (std::int32_t id : ids) s += " " + std::to_string(id);
      return s + "]";
    }
    return gpt2_ ? gpt2_->decode(narrow) : data::ByteTokenizer::decode(narrow);
  }
  const char* name() const { return gpt2_ ? "GPT-2 BPE" : "byte-level"; }

 private:
  mutable std::unique_ptr<data::Gpt2Tokenizer> gpt2_;  // encode() caches pieces
};

// A Hugging Face directory's tokenizer, where it is one of plait's: GPT-2's vocab.json and
// merges.txt, or a tokenizer.json of byte-level BPE with GPT-2's pre-tokenization or of plait's
// byte tokenizer (data/hf_tokenizer_json.h, which refuses the others naming the field).
std::string file_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

Tokens hf_tokens(const std::string& dir) {
  const fs::path vocab = fs::path(dir) / "vocab.json", merges = fs::path(dir) / "merges.txt";
  if (fs::exists(vocab) && fs::exists(merges)) {
    return Tokens::gpt2(data::Gpt2Tokenizer::parse(file_text(vocab), file_text(merges), vocab.string(), merges.string()));
  }
  const fs::path json = fs::path(dir) / "tokenizer.json";
  if (fs::exists(json)) {
    const data::HfTokenizerJson t = data::read_hf_tokenizer_json(file_text(json), json.string());
    if (t.kind == data::HfTokenizerJson::Kind::byte) return Tokens::byte();
    return Tokens::gpt2(data::Gpt2Tokenizer::parse(t.encoder_json, t.merges, json.string(), json.string()));
  }
  throw InputError(dir, "(tokenizer)", "no tokenizer: plait reads vocab.json with merges.txt, or tokenizer.json");
}

void run_generate(const GenerateArgs& args) {
  if (args.checkpoint.empty() == args.hf.empty()) throw Error("give one of --checkpoint DIR and --hf DIR");
  const int count = static_cast<int>(integer_flag("--tokens", args.tokens, 0, 1 << 20));
  runtime::SamplingOptions sampling;
  sampling.temperature = number_flag("--temperature", args.temperature, 0, 1e6);
  sampling.top_k = static_cast<int>(integer_flag("--top-k", args.top_k, 0, 1 << 30));
  sampling.top_p = number_flag("--top-p", args.top_p, 1e-9, 1);
  sampling.seed = static_cast<std::uint64_t>(integer_flag("--seed", args.seed, 0, INT64_MAX));
  if (!args.threads.empty()) omp_set_num_threads(static_cast<int>(positive_flag("--threads", args.threads, 4096)));

  spec::ModelSpec m;
  std::string source;
  std::unique_ptr<runtime::ResumePoint> point;
  std::unique_ptr<runtime::HfModel> hf;
  std::unique_ptr<Tokens> tokens;
  if (!args.checkpoint.empty()) {
    point = std::make_unique<runtime::ResumePoint>(runtime::find_resume_point(args.checkpoint));
    if (!point->reader) throw InputError(args.checkpoint, "(checkpoint)", "no complete checkpoint to generate with");
    m = runtime::checkpoint_model(*point->reader);
    source = point->reader->dir() + " (step " + std::to_string(point->reader->manifest().step) + ")";
    tokens = std::make_unique<Tokens>(runtime::checkpoint_tokenizer(*point->reader) == "gpt2"
                                          ? Tokens::gpt2(data::Gpt2Tokenizer::load(args.vocab_dir))
                                          : Tokens::byte());
  } else {
    hf = std::make_unique<runtime::HfModel>(args.hf);
    m = hf->model();
    source = args.hf + " (Hugging Face)";
    tokens = std::make_unique<Tokens>(hf_tokens(args.hf));
  }
  MemoryTracker tracker;
  model::StageModel model(m, model::StageSpec::whole_model(m), tracker);
  for (const model::NamedTensor& t : model.tensors()) {
    const std::span<float> values = model.parameters().subspan(t.offset, t.numel);
    if (hf) {
      hf->read(t, values);
    } else {
      point->reader->read(t.name, values);
    }
  }
  const std::vector<std::int32_t> prompt = tokens->encode(args.prompt);
  std::printf("plait generate: %s, %s, %s tokens, %d thread(s)\n", source.c_str(), spec::describe(m).c_str(),
              tokens->name(), omp_get_max_threads());
  char sampling_text[160];
  if (sampling.temperature == 0) {
    std::snprintf(sampling_text, sizeof sampling_text, "greedy (temperature 0)");
  } else {
    std::snprintf(sampling_text, sizeof sampling_text, "temperature %g, top-k %s, top-p %g", sampling.temperature,
                  sampling.top_k > 0 ? std::to_string(sampling.top_k).c_str() : "off (every token)", sampling.top_p);
  }
  std::printf("  sampling: %s, seed %llu\n", sampling_text, static_cast<unsigned long long>(sampling.seed));
  std::fflush(stdout);
  const runtime::Generation cached = runtime::generate(model, prompt, count, sampling, true);
  std::printf("---\n%s%s\n---\n", args.prompt.c_str(), tokens->decode(cached.tokens).c_str());
  std::printf("with the K/V cache: prompt of %zu tokens in %.4f s, then %d new tokens in %.4f s: %.1f tokens/s\n",
              prompt.size(), cached.prompt_seconds, count, cached.decode_seconds, cached.tokens_per_second());
  if (args.cache_only || count == 0) return;
  std::fflush(stdout);
  const runtime::Generation uncached = runtime::generate(model, prompt, count, sampling, false);
  std::size_t same = 0;
  while (same < uncached.tokens.size() && uncached.tokens[same] == cached.tokens[same]) ++same;
  std::printf("without the cache (a forward of the whole sequence per token): %d new tokens in %.4f s: %.1f tokens/s; %s\n",
              count, uncached.decode_seconds, uncached.tokens_per_second(),
              same == uncached.tokens.size()
                  ? "the same tokens"
                  : ("the tokens differ from token " + std::to_string(same) +
                     " on (the two orders of summation rounded a near tie differently)")
                        .c_str());
}

void register_generate(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Generate text with a trained model: the prompt's tokens, then --tokens new ones, each\n"
      "costing the forward of one position over the K/V cache. Prints the text, and the speed\n"
      "with the cache and without it (a forward of the whole sequence per token; --cache-only\n"
      "skips that). The tokenizer is the one the run's data used (docs/engine.md, \"Generation\")");
  auto args = std::make_shared<GenerateArgs>();
  cmd->add_option("--checkpoint", args->checkpoint,
                  "A step directory, or a checkpoint root (its newest complete checkpoint that verifies)")
      ->type_name("DIR");
  cmd->add_option("--hf", args->hf,
                  "Instead: a Hugging Face model directory (init.from's kind) whose tokenizer is\n"
                  "GPT-2's BPE or plait's byte-level tokenizer.json")
      ->type_name("DIR");
  cmd->add_option("--prompt", args->prompt, "The text to continue")->required()->type_name("TEXT");
  cmd->add_option("--tokens", args->tokens, "New tokens to generate (the prompt and them within max_seq)")
      ->capture_default_str()
      ->type_name("N");
  cmd->add_option("--temperature", args->temperature, "Softmax temperature; 0 is greedy decoding")
      ->capture_default_str()
      ->type_name("T");
  cmd->add_option("--top-k", args->top_k, "Sample among the K most likely tokens (0: all)")
      ->capture_default_str()
      ->type_name("K");
  cmd->add_option("--top-p", args->top_p, "Nucleus sampling: among the fewest most likely tokens whose probability reaches P")
      ->capture_default_str()
      ->type_name("P");
  cmd->add_option("--seed", args->seed, "Seed of the draws (the same seed gives the same text)")
      ->capture_default_str()
      ->type_name("S");
  cmd->add_option("--vocab-dir", args->vocab_dir,
                  "Runs with GPT-2's tokenizer: the directory with encoder.json and vocab.bpe\n"
                  "(default $PLAIT_GPT2_DIR or ~/.cache/plait/gpt2)")
      ->type_name("DIR");
  cmd->add_option("--threads", args->threads, "OpenMP/OpenBLAS threads (default: OMP_NUM_THREADS, else all cores)")
      ->type_name("N");
  cmd->add_flag("--cache-only", args->cache_only, "Do not also decode without the cache for the comparison");
  cmd->callback([args] { run_generate(*args); });
}

const CommandRegistration kRegistration(15, register_generate);

}  // namespace
}  // namespace plait::cli
