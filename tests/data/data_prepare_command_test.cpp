// `plait data prepare` end to end through the built executable.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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
  ShardSetSource train(find_token_shards((dir / "out").string(), "train"), 256);
  EXPECT_EQ(train.size(), 23);

  const CommandResult missing = run_plait("data prepare --tokenizer byte --out " + (dir / "out2").string() + " " +
                                          (dir / "nothing").string());
  EXPECT_EQ(missing.status, 1);
  EXPECT_EQ(missing.out, "");
  EXPECT_EQ(missing.err, "plait: error: " + (dir / "nothing").string() + ": (file): no such file or directory\n");
  const CommandResult bad = run_plait("data prepare --tokenizer word --out x y");
  EXPECT_NE(bad.status, 0);
}

}  // namespace
}  // namespace plait::data
