// `plait data prepare` end to end through the built executable.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "plait/data/token_source.h"

namespace plait::data {
namespace {
namespace fs = std::filesystem;

struct CommandResult {
  int status;
  std::string output;  // stdout and stderr
};

CommandResult run(const std::string& args) {
  const std::string cmd = std::string(PLAIT_BINARY) + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(DataPrepareCommand, WritesShardsAndASummaryAndFailsClearlyOnBadInput) {
  const fs::path dir = fs::temp_directory_path() / ("plait_prepare_cli_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "in");
  std::ofstream(dir / "in" / "a.txt") << "first line\nsecond line\nthird line\n";
  const CommandResult ok = run("data prepare --tokenizer byte --quiet --val-fraction 0.3 --out " +
                     (dir / "out").string() + " " + (dir / "in").string());
  ASSERT_EQ(ok.status, 0) << ok.output;
  EXPECT_NE(ok.output.find("1 file(s)"), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find("train 23 tokens in 1 shard(s)"), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find("val   11 tokens in 1 shard(s)"), std::string::npos) << ok.output;
  ShardSetSource train(find_token_shards((dir / "out").string(), "train"), 256);
  EXPECT_EQ(train.size(), 23);

  const CommandResult missing = run("data prepare --tokenizer byte --out " + (dir / "out2").string() + " " +
                          (dir / "nothing").string());
  EXPECT_EQ(missing.status, 1);
  EXPECT_EQ(missing.output, "plait: error: " + (dir / "nothing").string() +
                                ": (file): no such file or directory\n");
  const CommandResult bad = run("data prepare --tokenizer word --out x y");
  EXPECT_NE(bad.status, 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace plait::data
