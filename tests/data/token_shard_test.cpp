#include "plait/data/token_shard.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "plait/core/error.h"
#include "plait/data/token_source.h"
#include "support/temp_dir.h"

namespace plait::data {
namespace {
namespace fs = std::filesystem;

class TokenShardFiles : public test::TempDirTest {
 protected:
  std::string open_error(const std::string& file, std::optional<int> vocab = std::nullopt) {
    try {
      TokenShard s(file, vocab);
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  }
};

TEST_F(TokenShardFiles, WritesTheLlmcLayoutAndReadsItBack) {
  std::vector<std::uint16_t> tokens = {50256, 15496, 995, 0, 65535};
  write_token_shard(path("a.bin"), tokens);
  const std::string b = bytes_of(path("a.bin"));
  ASSERT_EQ(b.size(), 1024u + 2 * tokens.size());
  // Header read independently: little-endian int32 magic, version, count; the rest zero.
  const auto i32 = [&](std::size_t off) {
    return static_cast<std::int32_t>(static_cast<std::uint8_t>(b[off]) |
                                     static_cast<std::uint8_t>(b[off + 1]) << 8 |
                                     static_cast<std::uint8_t>(b[off + 2]) << 16 |
                                     static_cast<std::uint32_t>(static_cast<std::uint8_t>(b[off + 3])) << 24);
  };
  EXPECT_EQ(i32(0), 20240520);
  EXPECT_EQ(i32(4), 1);
  EXPECT_EQ(i32(8), 5);
  for (std::size_t off = 12; off < 1024; off += 4) ASSERT_EQ(i32(off), 0);
  EXPECT_EQ(static_cast<std::uint8_t>(b[1024]), 0x50);  // 50256 = 0xC450, little-endian
  EXPECT_EQ(static_cast<std::uint8_t>(b[1025]), 0xC4);
  EXPECT_FALSE(fs::exists(path("a.bin.tmp")));

  TokenShard shard(path("a.bin"));
  EXPECT_EQ(std::vector<std::uint16_t>(shard.tokens().begin(), shard.tokens().end()), tokens);
}

TEST_F(TokenShardFiles, RejectsBadHeadersNamingFileOffsetAndExpectedValue) {
  write_token_shard(path("good.bin"), std::vector<std::uint16_t>{1, 2, 3});
  const std::string good = bytes_of(path("good.bin"));
  const auto variant = [&](std::size_t off, std::uint8_t v) {
    std::string b = good;
    b[off] = static_cast<char>(v);
    put(path("bad.bin"), b);
    return open_error(path("bad.bin"));
  };
  const std::string f = path("bad.bin");
  EXPECT_EQ(variant(0, 0x29), f + ": offset 0 (magic): expected 20240520 (an llm.c token shard), found 20240425");
  EXPECT_EQ(variant(4, 2), f + ": offset 4 (version): expected 1 (uint16 tokens), found 2 (llm.c's uint32-token format, not supported)");
  EXPECT_EQ(variant(8, 4), f + ": offset 8 (token count): the header says 4 tokens, so the file should have 1024 + 2 x 4 = 1032 bytes, found 1030");
  EXPECT_EQ(variant(11, 0x80), f + ": offset 8 (token count): expected a count >= 0, found -2147483645");
  put(f, good.substr(0, 1029));  // truncated token data
  EXPECT_EQ(open_error(f), f + ": offset 8 (token count): the header says 3 tokens, so the file should have 1024 + 2 x 3 = 1030 bytes, found 1029");
  put(f, good.substr(0, 100));
  EXPECT_EQ(open_error(f), f + ": offset 0 (header): expected a 1024-byte header of 256 int32, but the file has 100 bytes");
  EXPECT_EQ(open_error(path("missing.bin")), path("missing.bin") + ": (file): cannot open the shard: No such file or directory");
  EXPECT_EQ(open_error(path("good.bin"), 3), path("good.bin") + ": offset 1028 (token 2): expected a token id below the vocabulary size 3, found 3");
  EXPECT_EQ(open_error(path("good.bin"), 4), "(no error)");
}

TEST_F(TokenShardFiles, ShardSetReadsAcrossShardBoundariesInNameOrder) {
  std::vector<std::uint16_t> all(100);
  std::iota(all.begin(), all.end(), 0);
  write_token_shard(path("c_train_000001.bin"), std::span(all).subspan(30, 70));
  write_token_shard(path("c_train_000000.bin"), std::span(all).subspan(0, 30));
  write_token_shard(path("c_val_000000.bin"), std::span(all).subspan(0, 5));
  const auto files = find_token_shards(dir_.string(), "train");
  ASSERT_EQ(files.size(), 2u);
  ShardSetSource src(files);
  EXPECT_EQ(src.size(), 100);
  std::vector<std::uint16_t> out(40);
  src.read(10, out);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(out[i], 10 + i);
  EXPECT_EQ(find_token_shards(dir_.string(), "val").size(), 1u);
  EXPECT_THROW(find_token_shards(dir_.string(), "test"), InputError);
}

}  // namespace
}  // namespace plait::data
