#include "plait/data/hf_tokenizer_files.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gpt2_test_vocabulary.h"
#include "plait/core/directory.h"
#include "plait/core/error.h"
#include "support/temp_dir.h"

namespace plait::data {
namespace {

class HfTokenizerFiles : public test::TempDirTest {};

TEST_F(HfTokenizerFiles, Gpt2FilesAreCopiedUnderHuggingFacesNamesByteForByte) {
  testing::SmallVocabulary v = testing::small_vocabulary({{"a", "b"}, {"ab", "c"}});
  nlohmann::json enc = nlohmann::json::parse(v.encoder_json);
  enc["<|endoftext|>"] = static_cast<int>(enc.size());
  v.encoder_json = enc.dump();
  std::filesystem::create_directories(path("vocab"));
  std::filesystem::create_directories(path("out"));
  put(path("vocab/encoder.json"), v.encoder_json);
  put(path("vocab/vocab.bpe"), v.merges);
  const Directory out = Directory::open(path("out"));
  const std::vector<std::string> files = write_hf_gpt2_tokenizer(out, path("vocab"), 64);
  EXPECT_EQ(files, (std::vector<std::string>{"vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json"}));
  EXPECT_EQ(bytes_of(path("out/vocab.json")), v.encoder_json);
  EXPECT_EQ(bytes_of(path("out/merges.txt")), v.merges);
  const nlohmann::json config = nlohmann::json::parse(bytes_of(path("out/tokenizer_config.json")));
  EXPECT_EQ(config.at("tokenizer_class"), "GPT2Tokenizer");
  EXPECT_EQ(config.at("eos_token"), "<|endoftext|>");
  EXPECT_EQ(config.at("model_max_length"), 64);
  // Never over an existing file.
  EXPECT_THROW(write_hf_gpt2_tokenizer(out, path("vocab"), 64), Error);
  EXPECT_EQ(bytes_of(path("out/vocab.json")), v.encoder_json);
}

TEST_F(HfTokenizerFiles, Gpt2FilesMustBeATokenizer) {
  std::filesystem::create_directories(path("vocab"));
  put(path("vocab/encoder.json"), "{\"a\": 0}");
  put(path("vocab/vocab.bpe"), "#version: 0.2\n");
  try {
    write_hf_gpt2_tokenizer(Directory::open(dir_.string()), path("vocab"), 64);
    FAIL() << "an encoder.json without the 256 bytes was copied";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path("vocab/encoder.json")), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(path("vocab.json")));
}

TEST_F(HfTokenizerFiles, TheByteTokenizerIsABpeWithoutMergesOverTheByteAlphabet) {
  const nlohmann::json t = nlohmann::json::parse(hf_byte_tokenizer_json());
  const nlohmann::json& model = t.at("model");
  EXPECT_EQ(model.at("type"), "BPE");
  EXPECT_TRUE(model.at("merges").empty());
  ASSERT_EQ(model.at("vocab").size(), 256u);
  // Every byte b is token b, spelled as GPT-2 spells it: space 'Ġ', newline 'Ċ', 'A' itself.
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(model.at("vocab").at(testing::spell(std::string(1, static_cast<char>(b)))), b) << b;
  }
  EXPECT_EQ(model.at("vocab").at("\xC4\xA0"), 32);  // U+0120
  EXPECT_EQ(model.at("vocab").at("A"), 65);
  EXPECT_EQ(t.at("pre_tokenizer").at("type"), "ByteLevel");
  EXPECT_EQ(t.at("pre_tokenizer").at("use_regex"), false);
  EXPECT_EQ(t.at("pre_tokenizer").at("add_prefix_space"), false);
  EXPECT_EQ(t.at("decoder").at("type"), "ByteLevel");
  const std::vector<std::string> files = write_hf_byte_tokenizer(Directory::open(dir_.string()), 128);
  EXPECT_EQ(bytes_of(path("tokenizer.json")), hf_byte_tokenizer_json());
  EXPECT_EQ(nlohmann::json::parse(bytes_of(path("tokenizer_config.json"))).at("tokenizer_class"), "PreTrainedTokenizerFast");
}

}  // namespace
}  // namespace plait::data
