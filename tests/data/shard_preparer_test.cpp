#include "plait/data/shard_preparer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "gpt2_test_vocabulary.h"
#include "plait/core/error.h"
#include "plait/data/gpt2_tokenizer.h"
#include "plait/data/token_source.h"
#include "support/temp_dir.h"

namespace plait::data {
namespace {
namespace fs = std::filesystem;

class PrepareShards : public test::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    fs::create_directories(dir_ / "in" / "sub");
  }
  void put(const std::string& rel, const std::string& bytes) { TempDirTest::put(path(rel), bytes); }
  std::vector<std::uint16_t> stream(const std::string& split) {
    ShardSetSource src(find_token_shards((dir_ / "out").string(), split));
    std::vector<std::uint16_t> t(static_cast<std::size_t>(src.size()));
    src.read(0, t);
    return t;
  }
};

TEST_F(PrepareShards, ByteTokensSplitIntoValThenTrainAtALineEnd) {
  put("in/a.txt", "line one\nline two\n");
  put("in/sub/b.txt", "third line\n");
  put("in/c.bin", std::string("bin\0ary", 7));
  put("in/empty.txt", "");
  PrepareOptions o;
  o.tokenizer = "byte";
  o.out_dir = (dir_ / "out").string();
  o.shard_tokens = 7;
  o.val_fraction = 0.2;  // 0.2 x 29 bytes -> 6 bytes, extended to the end of "line one\n"
  const PrepareSummary s = prepare_token_shards({(dir_ / "in").string()}, o);
  EXPECT_EQ(s.files.size(), 2u);
  EXPECT_EQ(s.skipped.size(), 2u);
  EXPECT_EQ(s.input_bytes, 29u);
  EXPECT_EQ(s.val_tokens, 9);
  EXPECT_EQ(s.train_tokens, 20);
  EXPECT_EQ(s.val_shards.size(), 2u);    // 7 + 2
  EXPECT_EQ(s.train_shards.size(), 3u);  // 7 + 7 + 6
  EXPECT_EQ(fs::path(s.train_shards[2]).filename(), "corpus_train_000002.bin");
  const auto val = stream("val");
  const auto train = stream("train");
  EXPECT_EQ(std::string(val.begin(), val.end()), "line one\n");
  EXPECT_EQ(std::string(train.begin(), train.end()), "line two\nthird line\n");

  // A second run into the same directory must not mix with the first.
  EXPECT_THROW(prepare_token_shards({(dir_ / "in").string()}, o), InputError);
  o.overwrite = true;
  o.shard_tokens = 1000;
  o.val_fraction = 0;
  const PrepareSummary again = prepare_token_shards({(dir_ / "in").string()}, o);
  EXPECT_EQ(again.val_shards.size(), 0u);
  EXPECT_EQ(stream("train").size(), 29u);
  EXPECT_THROW(find_token_shards((dir_ / "out").string(), "val"), InputError);
}

TEST_F(PrepareShards, RejectsBadOptionsAndInputs) {
  PrepareOptions o;
  o.tokenizer = "byte";
  o.out_dir = (dir_ / "out").string();
  o.val_fraction = 1.0;
  put("in/a.txt", "x");
  try {
    prepare_token_shards({(dir_ / "in").string()}, o);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--val-fraction: (value): expected a fraction in [0, 1), found 1.000000");
  }
  o.val_fraction = 0.1;
  EXPECT_THROW(prepare_token_shards({(dir_ / "nowhere").string()}, o), InputError);
  o.tokenizer = "gpt2";
  o.vocab_dir = (dir_ / "novocab").string();
  EXPECT_THROW(prepare_token_shards({(dir_ / "in").string()}, o), InputError);
}

TEST_F(PrepareShards, Gpt2ShardsDecodeToTheInputWithEndOfTextBetweenFiles) {
  const std::string vocab = testing::gpt2_vocabulary_dir();
  if (vocab.empty()) GTEST_SKIP() << "GPT-2 vocabulary not available (offline fixture)";
  // Long enough to cross several 1 MiB blocks, so the streaming carry is exercised.
  std::string a, b = "Second file.\n";
  for (int i = 0; a.size() < 2'500'000; ++i) {
    a += "Paragraph " + std::to_string(i) + ": the quick brown fox, naïve café, 日本語.\n\n";
  }
  put("in/a.txt", a);
  put("in/b.txt", b);
  PrepareOptions o;
  o.tokenizer = "gpt2";
  o.vocab_dir = vocab;
  o.out_dir = (dir_ / "out").string();
  o.shard_tokens = 300'000;
  o.val_fraction = 0.05;
  const PrepareSummary s = prepare_token_shards({(dir_ / "in").string()}, o);
  const auto val = stream("val");
  const auto train = stream("train");
  ASSERT_EQ(val.front(), 50256);
  Gpt2Tokenizer tok = Gpt2Tokenizer::load(vocab);
  std::vector<std::uint16_t> all(val.begin(), val.end());
  all.insert(all.end(), train.begin(), train.end());
  EXPECT_EQ(tok.decode(all), "<|endoftext|>" + a + "<|endoftext|>" + b);
  // Streaming in blocks gives the tokens of encoding each file whole (the val/train cut at a
  // line end falls between pieces, so it does not change them either).
  std::vector<std::uint16_t> expected = {50256};
  for (auto t : tok.encode(a)) expected.push_back(t);
  expected.push_back(50256);
  for (auto t : tok.encode(b)) expected.push_back(t);
  EXPECT_EQ(all, expected);
  EXPECT_GT(s.train_shards.size(), 1u);
}

}  // namespace
}  // namespace plait::data
