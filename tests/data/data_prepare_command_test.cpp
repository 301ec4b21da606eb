// `plait data prepare` end to end through the built executable.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "plait/data/document_length_file.h"
#include "plait/data/token_source.h"
#include "support/run_command.h"
#include "support/temp_dir.h"

namespace plait::data {
namespace {
namespace fs = std::filesystem;

using test::CommandResult;
using test::run_plait;

class DataPrepareCommand : public test::TempDirTest {};

TEST_F(DataPrepareCommand, WritesShardsAndASummaryAndFailsClearlyOnBadInput) {
  const fs::path dir = dir_;
  fs::create_directories(dir / "in");
  std::ofstream(dir / "in" / "a.txt") << "first line\nsecond line\nthird line\n";
  const CommandResult ok = run_plait("data prepare --tokenizer byte --quiet --val-fraction 0.3 --out " +
                                     (dir / "out").string() + " " + (dir / "in").string());
  ASSERT_EQ(ok.status, 0) << ok.out << ok.err;
  EXPECT_EQ(ok.err, "");  // --quiet: no progress line
  EXPECT_NE(ok.out.find("1 file(s)"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("train 23 tokens in 1 shard(s)"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("val   11 tokens in 1 shard(s)"), std::string::npos) << ok.out;
  // The file is one document, cut by the validation split: 23 tokens in train, 11 in val.
  EXPECT_NE(ok.out.find("  documents: 1 train (mean 23.0 tokens, longest 23), 1 val\n"
                        "  train document lengths (tokens, log2 buckets):\n"
                        "            16-31          1  ########################################\n"),
            std::string::npos)
      << ok.out;
  ShardSetSource train(find_token_shards((dir / "out").string(), "train"), 256);
  EXPECT_EQ(train.size(), 23);
  // The training split's lengths, machine-readable beside the shards (for --documents histogram:).
  EXPECT_NE(ok.out.find("histogram:PATH): " + (dir / "out" / "corpus.lengths.json").string()), std::string::npos) << ok.out;
  const LengthHistogram lengths = read_document_lengths((dir / "out").string());
  EXPECT_EQ(lengths.documents, 1);
  EXPECT_EQ(lengths.tokens, 23);
  ASSERT_EQ(lengths.bins.size(), 1u);
  EXPECT_EQ(lengths.bins[0], (LengthBin{23, 23, 1, 23}));
  // A second prepare of the name is refused, and --overwrite replaces the lengths file too.
  const CommandResult again = run_plait("data prepare --tokenizer byte --quiet --val-fraction 0.3 --out " +
                                        (dir / "out").string() + " " + (dir / "in").string());
  EXPECT_EQ(again.status, 1);
  std::ofstream(dir / "in" / "b.txt") << "another document\n";
  const CommandResult over = run_plait("data prepare --tokenizer byte --quiet --overwrite --val-fraction 0.3 --out " +
                                       (dir / "out").string() + " " + (dir / "in").string());
  ASSERT_EQ(over.status, 0) << over.err;
  EXPECT_EQ(read_document_lengths((dir / "out").string()).documents, 2);

  const CommandResult missing = run_plait("data prepare --tokenizer byte --out " + (dir / "out2").string() + " " +
                                          (dir / "nothing").string());
  EXPECT_EQ(missing.status, 1);
  EXPECT_EQ(missing.out, "");
  EXPECT_EQ(missing.err, "plait: error: " + (dir / "nothing").string() + ": (file): no such file or directory\n");
  const CommandResult bad = run_plait("data prepare --tokenizer word --out x y");
  EXPECT_NE(bad.status, 0);
}

// A linked input is followed and named with where it led; a disk that fills up (here the file
// size limit: write(2) fails with EFBIG as it fails with ENOSPC on a full disk) ends the run
// with one line and leaves nothing behind; an empty training split is one line too.
TEST_F(DataPrepareCommand, FollowsLinkedInputsAndLeavesNothingWhenAWriteFails) {
  const fs::path dir = dir_;
  fs::create_directories(dir / "data");
  std::string text;
  while (text.size() < 300000) text += "a line of text for the shards\n";
  std::ofstream(dir / "data" / "big.txt") << text;
  fs::create_symlink(dir / "data" / "big.txt", dir / "linked.txt");
  const std::string out = (dir / "out").string();
  const CommandResult full = test::run_command("bash -c 'ulimit -f 128; trap \"\" XFSZ; exec " + std::string(PLAIT_BINARY) +
                                               " data prepare --tokenizer byte --quiet --out " + out + " " +
                                               (dir / "linked.txt").string() + "'");
  EXPECT_EQ(full.status, 1) << full.err;
  EXPECT_NE(full.err.find("cannot write: File too large"), std::string::npos) << full.err;
  std::string left;
  for (const auto& e : fs::directory_iterator(out)) left += e.path().filename().string() + " ";
  EXPECT_EQ(left, ".plait.lock ");

  const CommandResult ok = run_plait("data prepare --tokenizer byte --quiet --out " + out + " " + (dir / "linked.txt").string());
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_NE(ok.out.find("  input " + (dir / "linked.txt").string() + " -> " + (dir / "data" / "big.txt").string() +
                        " (a link, followed)"),
            std::string::npos)
      << ok.out;

  std::ofstream(dir / "one.txt") << "a single line";
  const CommandResult empty = run_plait("data prepare --tokenizer byte --quiet --out " + (dir / "out3").string() + " " +
                                        (dir / "one.txt").string());
  EXPECT_EQ(empty.status, 1);
  EXPECT_EQ(empty.err, "plait: error: --val-fraction: 0.1: the validation split (the first 0.1 of the 13 input bytes, "
                       "extended to the end of their line) takes all of the text, leaving the training split empty; "
                       "lower --val-fraction, or give text of more lines\n");
}

}  // namespace
}  // namespace plait::data
