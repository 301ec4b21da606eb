#include "plait/data/hf_tokenizer_files.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "plait/core/atomic_file.h"
#include "plait/core/error.h"
#include "plait/data/gpt2_byte_alphabet.h"
#include "plait/data/gpt2_tokenizer.h"
#include "plait/data/utf8_decode.h"

namespace plait::data {
namespace {

using nlohmann::ordered_json;

void write_new(const Directory& out, const std::string& name, const std::string& text) {
  AtomicFile f(out, name, AtomicFile::Replace::kNever);
  f.write(text);
  f.commit();
}

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "(file)", "cannot open the file (scripts/fetch-gpt2-tokenizer.sh fetches it)");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::vector<std::string> write_hf_gpt2_tokenizer(const Directory& out, const std::string& vocab_dir,
                                                 std::int64_t max_length) {
  const std::string encoder = (std::filesystem::path(vocab_dir) / "encoder.json").string();
  const std::string merges = (std::filesystem::path(vocab_dir) / "vocab.bpe").string();
  const std::string encoder_text = read_whole(encoder), merges_text = read_whole(merges);
  // The files must be a tokenizer plait reads the same way (and has an <|endoftext|>).
  const Gpt2Tokenizer tokenizer = Gpt2Tokenizer::parse(encoder_text, merges_text, encoder, merges);
  if (!tokenizer.end_of_text()) {
    throw InputError(encoder, "<|endoftext|>", "missing; GPT-2's vocabulary ends with it");
  }
  write_new(out, "vocab.json", encoder_text);
  write_new(out, "merges.txt", merges_text);
  const ordered_json config = {{"tokenizer_class", "GPT2Tokenizer"},
                               {"model_max_length", max_length},
                               {"bos_token", "<|endoftext|>"},
                               {"eos_token", "<|endoftext|>"},
                               {"unk_token", "<|endoftext|>"},
                               {"add_prefix_space", false}};
  write_new(out, "tokenizer_config.json", config.dump(2) + "\n");
  const ordered_json special = {
      {"bos_token", "<|endoftext|>"}, {"eos_token", "<|endoftext|>"}, {"unk_token", "<|endoftext|>"}};
  write_new(out, "special_tokens_map.json", special.dump(2) + "\n");
  return {"vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json"};
}

std::string hf_byte_tokenizer_json() {
  ordered_json vocab = ordered_json::object();
  for (int b = 0; b < 256; ++b) vocab[encode_utf8(gpt2_byte_to_char(static_cast<std::uint8_t>(b)))] = b;
  const ordered_json byte_level = {{"type", "ByteLevel"},
                                   {"add_prefix_space", false},
                                   {"trim_offsets", false},
                                   {"use_regex", false}};
  const ordered_json doc = {{"version", "1.0"},
                            {"truncation", nullptr},
                            {"padding", nullptr},
                            {"added_tokens", ordered_json::array()},
                            {"normalizer", nullptr},
                            {"pre_tokenizer", byte_level},
                            {"post_processor", nullptr},
                            {"decoder", byte_level},
                            {"model",
                             {{"type", "BPE"},
                              {"dropout", nullptr},
                              {"unk_token", nullptr},
                              {"continuing_subword_prefix", nullptr},
                              {"end_of_word_suffix", nullptr},
                              {"fuse_unk", false},
                              {"byte_fallback", false},
                              {"ignore_merges", false},
                              {"vocab", vocab},
                              {"merges", ordered_json::array()}}}};
  return doc.dump(2) + "\n";
}

std::vector<std::string> write_hf_byte_tokenizer(const Directory& out, std::int64_t max_length) {
  write_new(out, "tokenizer.json", hf_byte_tokenizer_json());
  const ordered_json config = {{"tokenizer_class", "PreTrainedTokenizerFast"}, {"model_max_length", max_length}};
  write_new(out, "tokenizer_config.json", config.dump(2) + "\n");
  return {"tokenizer.json", "tokenizer_config.json"};
}

}  // namespace plait::data
