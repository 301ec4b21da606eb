#include "plait/data/shard_preparer.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "gpt2_test_vocabulary.h"
#include "plait/core/directory_lock.h"
#include "plait/core/error.h"
#include "plait/core/unique_name.h"
#include "plait/data/gpt2_tokenizer.h"
#include "plait/data/token_source.h"
#include "support/file_size_limit.h"
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

// What a prepare leaves in --out besides its lock file: "" when nothing.
std::string leftovers(const fs::path& out) {
  std::string names;
  for (const auto& e : fs::directory_iterator(out)) {
    const std::string n = e.path().filename().string();
    if (n != ".plait.lock") names += n + " ";
  }
  return names;
}

// Two prepares into one --out: while the first runs (held inside its progress callback), the
// second is refused at once naming it; the first then finishes with its corpus complete.
TEST_F(PrepareShards, ASecondPrepareIntoTheSameDirectoryIsRefusedWhileTheFirstRuns) {
  std::string text;
  for (int i = 0; i < 40000; ++i) text += "line " + std::to_string(i) + "\n";  // several 1 MiB blocks... of one
  put("in/a.txt", text);
  PrepareOptions first;
  first.tokenizer = "byte";
  first.out_dir = (dir_ / "out").string();
  first.shard_tokens = 100000;
  std::mutex m;
  std::condition_variable cv;
  bool inside = false, release = false;
  first.progress = [&](const PrepareProgress&) {
    std::unique_lock lock(m);
    inside = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  };
  PrepareSummary summary;
  std::thread running([&] { summary = prepare_token_shards({path("in/a.txt")}, first); });
  {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return inside; });
  }
  PrepareOptions second = first;
  second.progress = nullptr;
  second.overwrite = true;
  try {
    prepare_token_shards({path("in/a.txt")}, second);
    ADD_FAILURE() << "the second prepare ran";
  } catch (const DirectoryInUseError& e) {
    EXPECT_EQ(std::string(e.what()), first.out_dir + ": in use by another plait run (pid " + std::to_string(::getpid()) +
                                         " on host " + host_name() +
                                         "); a data --out directory is written by one run at a time: wait for that "
                                         "run to end, or choose another directory");
  }
  {
    std::lock_guard lock(m);
    release = true;
  }
  cv.notify_all();
  running.join();
  EXPECT_EQ(summary.train_tokens + summary.val_tokens, static_cast<std::int64_t>(text.size()));
  const auto val = stream("val");
  const auto train = stream("train");
  EXPECT_EQ(std::string(val.begin(), val.end()) + std::string(train.begin(), train.end()), text);
  EXPECT_TRUE(fs::exists(dir_ / "out" / "corpus.shards.json"));
}

TEST_F(PrepareShards, AnEmptyTrainingSplitIsAnErrorAndLeavesNothing) {
  put("in/a.txt", "one line without an end, all of it validation");
  PrepareOptions o;
  o.tokenizer = "byte";
  o.out_dir = (dir_ / "out").string();
  try {
    prepare_token_shards({path("in/a.txt")}, o);
    FAIL() << "prepared an empty training split";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "--val-fraction: 0.1: the validation split (the first 0.1 of the 45 input bytes, "
                                     "extended to the end of their line) takes all of the text, leaving the training "
                                     "split empty; lower --val-fraction, or give text of more lines");
  }
  EXPECT_EQ(leftovers(dir_ / "out"), "");
}

// A failing write (RLIMIT_FSIZE: write(2) fails with EFBIG, as a full disk fails it with ENOSPC)
// leaves no temporary file, no staging directory and no shard; the old corpus of the name stays.
TEST_F(PrepareShards, AFailedWriteRemovesEveryTemporaryFile) {
  put("in/small.txt", "a\nb\nc\n");
  PrepareOptions o;
  o.tokenizer = "byte";
  o.out_dir = (dir_ / "out").string();
  o.val_fraction = 0.3;
  prepare_token_shards({path("in/small.txt")}, o);
  const std::string before = leftovers(dir_ / "out");
  std::string big;
  while (big.size() < 200000) big += "some text on a line\n";
  put("in/big.txt", big);
  o.overwrite = true;
  o.shard_tokens = 50000;
  const std::string error = test::error_under_file_size_limit(64 * 1024, [&] { prepare_token_shards({path("in/big.txt")}, o); });
  EXPECT_NE(error.find("cannot write: File too large"), std::string::npos) << error;
  EXPECT_EQ(leftovers(dir_ / "out"), before);
  EXPECT_EQ(stream("train").size() + stream("val").size(), 6u);
}

// Links planted at names prepare writes: an old manifest or shard that is a link is removed as
// an entry by --overwrite (its target untouched); a link that appears at a shard's name while
// the run works is never replaced (the run fails, removing all it wrote); the lock file's name
// is never followed.
TEST_F(PrepareShards, PlantedLinksAreNeverFollowedNorReplaced) {
  put("in/a.txt", "first line\nsecond line\nthird line\n");
  put("victim", "precious");
  fs::create_directories(dir_ / "out");
  fs::create_symlink(path("victim"), dir_ / "out" / "corpus.shards.json");
  fs::create_symlink(path("victim"), dir_ / "out" / "corpus_val_000000.bin");
  PrepareOptions o;
  o.tokenizer = "byte";
  o.out_dir = (dir_ / "out").string();
  EXPECT_THROW(prepare_token_shards({path("in/a.txt")}, o), InputError);  // refused without --overwrite
  o.overwrite = true;
  prepare_token_shards({path("in/a.txt")}, o);
  EXPECT_FALSE(fs::is_symlink(dir_ / "out" / "corpus.shards.json"));
  EXPECT_FALSE(fs::is_symlink(dir_ / "out" / "corpus_val_000000.bin"));
  EXPECT_EQ(bytes_of(path("victim")), "precious");
  // A link at a new shard's name (this run cuts smaller shards), planted while the run works:
  // the move into place refuses it, and what the run had moved is removed again.
  o.shard_tokens = 10;
  o.progress = [&](const PrepareProgress&) {
    if (!fs::is_symlink(dir_ / "out" / "corpus_train_000002.bin")) {
      fs::create_symlink(path("victim"), dir_ / "out" / "corpus_train_000002.bin");
    }
  };
  try {
    prepare_token_shards({path("in/a.txt")}, o);
    FAIL() << "replaced the link";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), o.out_dir + "/corpus_train_000002.bin: already exists; refusing to replace it "
                                                 "(another run may have written it)");
  }
  EXPECT_EQ(leftovers(dir_ / "out"), "corpus_train_000002.bin ");  // the link alone
  EXPECT_EQ(bytes_of(path("victim")), "precious");
  fs::remove(dir_ / "out" / "corpus_train_000002.bin");
  fs::remove(dir_ / "out" / ".plait.lock");
  fs::create_symlink(path("victim"), dir_ / "out" / ".plait.lock");
  o.progress = nullptr;
  EXPECT_THROW(prepare_token_shards({path("in/a.txt")}, o), Error);
  EXPECT_EQ(bytes_of(path("victim")), "precious");
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
