#include "plait/data/hf_tokenizer_json.h"

#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "gpt2_test_vocabulary.h"
#include "plait/core/error.h"
#include "plait/data/gpt2_tokenizer.h"
#include "plait/data/hf_tokenizer_files.h"

namespace plait::data {
namespace {

using nlohmann::json;

// A tokenizer.json of byte-level BPE as the `tokenizers` library saves GPT-2's, from a small
// vocabulary; merges as "a b" strings or (newer versions) as pairs.
json gpt2_style(const testing::SmallVocabulary& v, bool pairs) {
  json merges = json::array();
  std::istringstream lines(v.merges);
  std::string line;
  std::getline(lines, line);  // #version
  while (std::getline(lines, line)) {
    const std::size_t space = line.find(' ');
    if (pairs) {
      merges.push_back({line.substr(0, space), line.substr(space + 1)});
    } else {
      merges.push_back(line);
    }
  }
  json vocab = json::parse(v.encoder_json);
  const int eot = static_cast<int>(vocab.size());
  return {{"version", "1.0"},
          {"added_tokens", {{{"id", eot}, {"content", "<|endoftext|>"}, {"special", true}}}},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"byte_fallback", false}, {"vocab", vocab}, {"merges", merges}}}};
}

std::string refusal(const json& t) {
  try {
    read_hf_tokenizer_json(t.dump(), "tok.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(HfTokenizerJson, ReadsByteLevelBpeWithGpt2sPreTokenization) {
  const testing::SmallVocabulary v = testing::small_vocabulary({{"t", "h"}, {"th", "e"}, {" ", "the"}, {"c", "a"}});
  for (const bool pairs : {false, true}) {
    const HfTokenizerJson t = read_hf_tokenizer_json(gpt2_style(v, pairs).dump(), "tok.json");
    ASSERT_EQ(t.kind, HfTokenizerJson::Kind::gpt2);
    Gpt2Tokenizer from_json = Gpt2Tokenizer::parse(t.encoder_json, t.merges, "tok.json", "tok.json");
    json enc = json::parse(v.encoder_json);
    enc["<|endoftext|>"] = static_cast<int>(enc.size());
    Gpt2Tokenizer from_files = Gpt2Tokenizer::parse(enc.dump(), v.merges, "encoder.json", "vocab.bpe");
    const std::string text = "the cat, the hat; then the catch";
    EXPECT_EQ(from_json.encode(text), from_files.encode(text));
    EXPECT_LT(from_json.encode(text).size(), text.size());  // the merges applied
    EXPECT_TRUE(from_json.end_of_text().has_value());
  }
}

TEST(HfTokenizerJson, ReadsPlaitsByteTokenizer) {
  EXPECT_EQ(read_hf_tokenizer_json(hf_byte_tokenizer_json(), "tok.json").kind, HfTokenizerJson::Kind::byte);
}

TEST(HfTokenizerJson, RefusesWhatItDoesNotImplementNamingTheField) {
  const json base = gpt2_style(testing::small_vocabulary({{"a", "b"}}), false);
  json sp = base;  // LLaMA 2: SentencePiece-style BPE
  sp["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", "\u2581"}}}}};
  sp["model"]["byte_fallback"] = true;
  EXPECT_EQ(refusal(sp).rfind("tok.json: model.byte_fallback: SentencePiece-style BPE (byte fallback); plait reads", 0), 0u)
      << refusal(sp);
  sp["model"]["byte_fallback"] = false;
  EXPECT_EQ(refusal(sp).rfind("tok.json: normalizer: a \"Sequence\" normalizer", 0), 0u) << refusal(sp);
  json llama3 = base;  // Llama 3: its own split pattern before a ByteLevel without regex
  llama3["pre_tokenizer"] = {{"type", "Sequence"},
                             {"pretokenizers", {{{"type", "Split"}}, {{"type", "ByteLevel"}, {"use_regex", false}}}}};
  EXPECT_EQ(refusal(llama3).rfind("tok.json: pre_tokenizer: a \"Sequence\" pre-tokenizer other than GPT-2's", 0), 0u)
      << refusal(llama3);
  json unigram = base;
  unigram["model"] = {{"type", "Unigram"}};
  EXPECT_EQ(refusal(unigram).rfind("tok.json: model.type: \"Unigram\" is not implemented", 0), 0u) << refusal(unigram);
}

}  // namespace
}  // namespace plait::data
