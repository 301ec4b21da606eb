// The shard manifest plait data prepare writes beside the shards (<name>.shards.json): each
// shard's size and CRC-32C and the tokenizer. The loader checks a shard's checksum as it reads
// it, the listing against the directory, and the tokenizer against the one declared; shards
// without a manifest (llm.c's own) still load.
#include "plait/data/shard_manifest.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "plait/core/crc32c.h"
#include "plait/core/error.h"
#include "plait/data/shard_preparer.h"
#include "plait/data/token_source.h"
#include "support/temp_dir.h"

namespace plait::data {
namespace {
namespace fs = std::filesystem;

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

class ShardManifests : public test::TempDirTest {
 protected:
  // Byte shards of 40 tokens from a 300-byte text: 1 validation shard, 7 train shards.
  PrepareSummary prepare(const std::string& tokenizer = "byte") {
    std::string text;
    for (int i = 0; i < 30; ++i) text += "line " + std::to_string(i % 10) + " of text\n";
    put(path("in.txt"), text.substr(0, 300));
    PrepareOptions o;
    o.tokenizer = tokenizer;
    o.out_dir = path("out");
    o.shard_tokens = 40;
    o.overwrite = true;
    return prepare_token_shards({path("in.txt")}, o);
  }
  std::vector<std::uint16_t> stream(const std::vector<ShardSetSource::File>& files) {
    const ShardSetSource src(files, 256);
    std::vector<std::uint16_t> t(static_cast<std::size_t>(src.size()));
    src.read(0, t);
    return t;
  }
};

TEST_F(ShardManifests, PrepareRecordsEveryShardsChecksumAndTheTokenizer) {
  const PrepareSummary s = prepare();
  EXPECT_EQ(s.manifest, path("out/corpus.shards.json"));
  const ShardManifest m = parse_shard_manifest(bytes_of(s.manifest), s.manifest);
  EXPECT_EQ(m.tokenizer, "byte");
  EXPECT_EQ(m.vocab_size, 256);
  ASSERT_EQ(m.shards.size(), s.train_shards.size() + s.val_shards.size());
  for (const std::string& shard : s.train_shards) {
    const ShardRecord* r = m.find(fs::path(shard).filename().string());
    ASSERT_NE(r, nullptr) << shard;
    EXPECT_EQ(r->split, "train");
    const std::string bytes = bytes_of(shard);
    EXPECT_EQ(r->bytes, bytes.size());
    EXPECT_EQ(r->crc32c, crc32c(std::as_bytes(std::span(bytes.data(), bytes.size()))));
    EXPECT_EQ(r->bytes, 1024 + 2 * static_cast<std::uint64_t>(r->tokens));
  }
  EXPECT_EQ(m.find(fs::path(s.val_shards.at(0)).filename().string())->split, "val");
  // The reader gets every shard with its checksum, and reads the same stream as without.
  const auto files = shards_to_read(path("out"), "train", "byte", "cfg.json (data.tokenizer)");
  ASSERT_EQ(files.size(), s.train_shards.size());
  for (const auto& f : files) {
    ASSERT_TRUE(f.checksum);
    EXPECT_EQ(f.checksum->recorded_in, s.manifest);
  }
  std::vector<ShardSetSource::File> plain;
  for (const std::string& f : s.train_shards) plain.push_back({f, std::nullopt});
  EXPECT_EQ(stream(files), stream(plain));
}

TEST_F(ShardManifests, AFlippedByteIsCaughtAsTheShardIsRead) {
  const PrepareSummary s = prepare();
  const std::string victim = s.train_shards.at(2);
  std::string bytes = bytes_of(victim);
  bytes[1024 + 6] ^= 0x02;  // one bit of one token: still a valid byte token, still a valid shard
  put(victim, bytes);
  EXPECT_NO_THROW(ShardSetSource(std::vector<std::string>{victim}, 256));  // the format cannot tell
  const auto files = shards_to_read(path("out"), "train", "byte", "cfg.json (data.tokenizer)");
  const std::string e = error_of([&] { ShardSetSource src(files, 256); });
  EXPECT_EQ(e.rfind(victim + ": (checksum): " + s.manifest + " records CRC-32C 0x", 0), 0u) << e;
  EXPECT_NE(e.find(", the file's is 0x"), std::string::npos) << e;
  EXPECT_NE(e.find("; the shard is corrupted (or was changed since it was prepared)"), std::string::npos) << e;
}

TEST_F(ShardManifests, ATokenizerMismatchIsRefusedEitherWay) {
  const PrepareSummary s = prepare();
  EXPECT_EQ(error_of([&] { shards_to_read(path("out"), "train", "gpt2", "cfg.json (data.tokenizer)"); }),
            s.manifest + ": tokenizer: the shards hold byte tokens (plait data prepare --tokenizer byte), but "
                         "cfg.json (data.tokenizer) declares \"gpt2\"; reading them as gpt2 tokens would train on nonsense");
  // The reverse, with a manifest that says gpt2 (as GPT-2 shards' would).
  ShardManifest m = parse_shard_manifest(bytes_of(s.manifest), s.manifest);
  m.tokenizer = "gpt2";
  m.vocab_size = 50257;
  write_shard_manifest(s.manifest, m);
  EXPECT_NE(error_of([&] { shards_to_read(path("out"), "val", "byte", "cfg.json (data.tokenizer)"); })
                .find("tokenizer: the shards hold GPT-2 BPE tokens (plait data prepare --tokenizer gpt2), but "
                      "cfg.json (data.tokenizer) declares \"byte\""),
            std::string::npos);
}

TEST_F(ShardManifests, TheListingMustMatchTheDirectory) {
  const PrepareSummary s = prepare();
  // A stray shard of the same name the manifest does not list.
  fs::copy_file(s.train_shards.at(0), path("out/corpus_train_000099.bin"));
  EXPECT_NE(error_of([&] { shards_to_read(path("out"), "train", "byte", "c"); })
                .find("corpus_train_000099.bin: (file): not listed in " + s.manifest + " (as a train shard)"),
            std::string::npos);
  fs::remove(path("out/corpus_train_000099.bin"));
  // A listed shard that is gone: the stream would silently be another one.
  fs::remove(s.train_shards.at(3));
  EXPECT_EQ(error_of([&] { shards_to_read(path("out"), "train", "byte", "c"); }),
            s.manifest + ": shards: corpus_train_000003.bin is listed but missing from " + path("out"));
}

TEST_F(ShardManifests, ShardsWithoutAManifestStillLoadUnverified) {
  const PrepareSummary s = prepare();
  fs::remove(s.manifest);
  const auto files = shards_to_read(path("out"), "train", "byte", "c");
  ASSERT_EQ(files.size(), s.train_shards.size());
  for (const auto& f : files) EXPECT_FALSE(f.checksum);
  // llm.c's own naming (tiny_shakespeare_val.bin) has no manifest either.
  fs::copy_file(s.val_shards.at(0), path("tiny_shakespeare_val.bin"));
  EXPECT_EQ(shard_corpus_name(path("tiny_shakespeare_val.bin")), "tiny_shakespeare");
  EXPECT_EQ(shard_manifest_path(path("tiny_shakespeare_val.bin")), path("tiny_shakespeare.shards.json"));
  EXPECT_FALSE(shards_to_read(path("tiny_shakespeare_val.bin"), "val", "byte", "c").at(0).checksum);
  EXPECT_EQ(shard_corpus_name("x/corpus_train_000003.bin"), "corpus");
  EXPECT_EQ(shard_corpus_name("x/notashard.bin"), "");
}

TEST_F(ShardManifests, TheParserIsStrict) {
  const std::string ok = R"({"format": "plait-token-shards", "version": 1, "tokenizer": "byte", "vocab_size": 256,
    "shards": [{"file": "a_train_000000.bin", "split": "train", "tokens": 2, "bytes": 1028, "crc32c": "0x0000abcd"}]})";
  EXPECT_EQ(parse_shard_manifest(ok, "m.json").shards.at(0).crc32c, 0xabcdu);
  const auto bad = [&](const std::string& from, const std::string& to) {
    std::string t = ok;
    t.replace(t.find(from), from.size(), to);
    return error_of([&] { parse_shard_manifest(t, "m.json"); });
  };
  EXPECT_EQ(bad("\"a_train_000000.bin\"", "\"../x.bin\""),
            "m.json: shards[0].file: expected a plain file name in the manifest's directory, found \"../x.bin\"");
  EXPECT_EQ(bad("1028", "1030"), "m.json: shards[0].bytes: expected 1024 + 2 x tokens = 1028, found 1030");
  EXPECT_EQ(bad("0x0000abcd", "0xABCD"), "m.json: shards[0].crc32c: expected \"0x\" and 8 lower-case hex digits, found \"0xABCD\"");
  EXPECT_EQ(bad("\"byte\"", "\"bpe\""), "m.json: tokenizer: expected \"byte\" or \"gpt2\", found \"bpe\"");
  EXPECT_EQ(bad("\"split\": \"train\"", "\"split\": \"test\""), "m.json: shards[0].split: expected \"train\" or \"val\", found \"test\"");
  EXPECT_EQ(bad("\"tokens\": 2,", "\"tokens\": 2, \"tokens\": 2,"),
            "m.json: shards[0].tokens: the key \"tokens\" appears twice in one object (reading is strict: which one is meant?)");
  EXPECT_EQ(bad("\"version\": 1,", "\"version\": 1, \"extra\": 0,"), "m.json: extra: unknown field");
}

}  // namespace
}  // namespace plait::data
