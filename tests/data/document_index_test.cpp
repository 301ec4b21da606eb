// The document boundary index plait data prepare writes beside each shard (<shard>.docs), its
// checksum in the shard manifest, and where the loaders find documents without one: from
// <|endoftext|> in GPT-2 shards, refused for byte shards (no separator).
#include "plait/data/document_index.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "plait/core/crc32c.h"
#include "plait/core/error.h"
#include "plait/data/document_starts.h"
#include "plait/data/shard_manifest.h"
#include "plait/data/shard_preparer.h"
#include "plait/data/token_shard.h"
#include "support/temp_dir.h"

namespace plait::data {
namespace {
namespace fs = std::filesystem;

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::span<const std::byte> as_bytes(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

std::string le32(std::uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  return s;
}

// An index's bytes spelled out independently of the writer.
std::string index_file(std::int32_t tokens, const std::vector<std::uint32_t>& starts, std::int32_t magic = 20250624,
                       std::int32_t version = 1) {
  std::string s = le32(static_cast<std::uint32_t>(magic)) + le32(static_cast<std::uint32_t>(version)) +
                  le32(static_cast<std::uint32_t>(tokens)) + le32(static_cast<std::uint32_t>(starts.size()));
  for (const std::uint32_t x : starts) s += le32(x);
  return s;
}

TEST(DocumentIndex, RoundTripsThroughItsDocumentedLayout) {
  const DocumentIndex index{1000, {0, 7, 300, 999}};
  const std::vector<std::byte> bytes = document_index_bytes(index);
  const std::string expected = index_file(1000, {0, 7, 300, 999});
  ASSERT_EQ(bytes.size(), expected.size());
  EXPECT_EQ(std::memcmp(bytes.data(), expected.data(), bytes.size()), 0);
  const DocumentIndex back = parse_document_index(bytes, "x.docs");
  EXPECT_EQ(back.shard_tokens, 1000);
  EXPECT_EQ(back.starts, index.starts);
  // No documents starting in a shard (one long document runs through it) is valid too.
  EXPECT_TRUE(parse_document_index(document_index_bytes({5, {}}), "x.docs").starts.empty());
  EXPECT_EQ(document_index_name("data/corpus_train_000003.bin"), "data/corpus_train_000003.docs");
  EXPECT_EQ(document_index_name("notashard.txt"), "");
}

TEST(DocumentIndex, TheParserNamesTheFileTheOffsetAndWhatItExpected) {
  const auto error = [](const std::string& bytes) { return error_of([&] { parse_document_index(as_bytes(bytes), "c.docs"); }); };
  EXPECT_EQ(error("abc"), "c.docs: offset 0 (header): expected a 16-byte header of 4 int32, but the file has 3 bytes");
  EXPECT_EQ(error(index_file(10, {0}, 20240520)),
            "c.docs: offset 0 (magic): expected 20250624 (a plait document index), found 20240520");
  EXPECT_EQ(error(index_file(10, {0}, 20250624, 2)), "c.docs: offset 4 (version): expected 1, found 2");
  EXPECT_EQ(error(index_file(-4, {})), "c.docs: offset 8 (token count): expected a count >= 0, found -4");
  EXPECT_EQ(error(index_file(10, {0, 4}).substr(0, 20)),
            "c.docs: offset 12 (document count): the header says 2 documents, so the file should have 16 + 4 x 2 = "
            "24 bytes, found 20");
  EXPECT_EQ(error(index_file(10, {0, 4, 4})),
            "c.docs: offset 24 (document 2): expected a start above 4 and below the shard's 10 tokens, found 4");
  EXPECT_EQ(error(index_file(10, {0, 10})),
            "c.docs: offset 20 (document 1): expected a start above 0 and below the shard's 10 tokens, found 10");
  std::string negative = index_file(10, {});
  negative[12] = '\xff', negative[13] = '\xff', negative[14] = '\xff', negative[15] = '\xff';
  EXPECT_NE(error(negative).find("offset 12 (document count): the header says -1 documents"), std::string::npos);
  EXPECT_THROW(document_index_bytes({10, {3, 2}}), Error);  // the writer refuses what the parser would
}

class DocumentIndexFiles : public test::TempDirTest {
 protected:
  // Byte tokens: three documents of 5, 12 and 9 bytes; the first is the validation split (its
  // whole line), the other two the training split, in shards of `shard_tokens`.
  PrepareSummary prepare(PrepareOptions o = {}, std::int64_t shard_tokens = 5) {
    fs::create_directories(dir_ / "in");
    put(path("in/a.txt"), "aaaa\n");
    put(path("in/b.txt"), "bbbbbbbbbbb\n");
    put(path("in/c.txt"), "cccccccc\n");
    o.tokenizer = "byte";
    o.out_dir = path("out");
    o.shard_tokens = shard_tokens;
    o.val_fraction = 0.1;  // 3 of 26 bytes -> the first line, "aaaa\n"
    o.overwrite = true;
    return prepare_token_shards({path("in")}, o);
  }
  std::vector<std::int64_t> starts(const std::string& split, std::optional<std::uint16_t> eot = std::nullopt) {
    const auto files = shards_to_read(path("out"), split, "byte", "cfg.json (data.tokenizer)");
    const ShardSetSource source(files, 256);
    return document_starts(files, source, eot);
  }
};

TEST_F(DocumentIndexFiles, PrepareWritesOneBesideEveryShardAndRecordsItsChecksum) {
  const PrepareSummary s = prepare();
  EXPECT_EQ(s.val_tokens, 5);
  EXPECT_EQ(s.train_tokens, 21);
  ASSERT_EQ(s.train_shards.size(), 5u);  // 5 + 5 + 5 + 5 + 1
  // Train documents start at stream positions 0 (b.txt) and 12 (c.txt): shard 2, offset 2.
  const std::vector<std::vector<std::uint32_t>> expected = {{0}, {}, {2}, {}, {}};
  const ShardManifest m = parse_shard_manifest(bytes_of(s.manifest), s.manifest);
  EXPECT_NE(bytes_of(s.manifest).find("\"version\": 2"), std::string::npos);
  for (std::size_t i = 0; i < s.train_shards.size(); ++i) {
    const std::string docs = document_index_name(s.train_shards[i]);
    const std::string bytes = bytes_of(docs);
    const DocumentIndex index = parse_document_index(as_bytes(bytes), docs);
    EXPECT_EQ(index.starts, expected[i]) << docs;
    EXPECT_EQ(index.shard_tokens, i < 4 ? 5 : 1);
    const ShardRecord* r = m.find(fs::path(s.train_shards[i]).filename().string());
    ASSERT_TRUE(r && r->documents) << docs;
    EXPECT_EQ(r->documents->file, fs::path(docs).filename().string());
    EXPECT_EQ(r->documents->count, static_cast<std::int64_t>(expected[i].size()));
    EXPECT_EQ(r->documents->bytes, bytes.size());
    EXPECT_EQ(r->documents->crc32c, crc32c(as_bytes(bytes)));
  }
  EXPECT_EQ(starts("train"), (std::vector<std::int64_t>{0, 12}));
  EXPECT_EQ(starts("val"), (std::vector<std::int64_t>{0}));
  // The summary's documents: 2 in train (12 and 9 tokens: buckets 8-15), 1 in val (5 tokens).
  EXPECT_EQ(s.train_documents.count, 2);
  EXPECT_EQ(s.train_documents.tokens, 21);
  EXPECT_EQ(s.train_documents.longest, 12);
  EXPECT_EQ(s.train_documents.buckets, (std::vector<std::int64_t>{0, 0, 0, 2}));
  EXPECT_EQ(s.val_documents.count, 1);
  EXPECT_EQ(s.val_documents.buckets, (std::vector<std::int64_t>{0, 0, 1}));
}

TEST_F(DocumentIndexFiles, AChecksumMismatchIsRefusedInOneLineNamingTheFile) {
  const PrepareSummary s = prepare();
  const std::string docs = document_index_name(s.train_shards.at(2));
  // Another valid index (a start moved): only the checksum can tell.
  put(docs, index_file(5, {3}));
  const std::string e = error_of([&] { starts("train"); });
  EXPECT_EQ(e.rfind(docs + ": (checksum): " + s.manifest + " records CRC-32C 0x", 0), 0u) << e;
  EXPECT_NE(e.find("; the document index is corrupted (or was changed since it was prepared)"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
  // A listed index that is gone.
  fs::remove(docs);
  EXPECT_EQ(error_of([&] { starts("train"); }), docs + ": (file): does not exist");
}

TEST_F(DocumentIndexFiles, WithoutAnIndexGpt2ShardsAreSplitAtEndOfTextAndByteShardsRefused) {
  const PrepareSummary s = prepare();
  fs::remove(s.manifest);  // an older plait's corpus: shards only
  const std::string shard = s.train_shards.at(0);
  EXPECT_EQ(error_of([&] { starts("train"); }),
            shard + ": (document index): no document index is recorded for it (no version 2 shard manifest beside "
                    "it: an older plait's or another tool's shard), and byte-level shards have no <|endoftext|> to find "
                    "documents by; prepare the corpus again with plait data prepare, or set data.packing to \"stream\"");
  // GPT-2 shards in llm.c's layout, <|endoftext|> before each document, across two shards.
  fs::create_directories(dir_ / "llmc");
  write_token_shard(path("llmc/web_train_000000.bin"), std::vector<std::uint16_t>{50256, 10, 11, 50256, 12});
  write_token_shard(path("llmc/web_train_000001.bin"), std::vector<std::uint16_t>{13, 14, 50256, 15});
  const auto files = shards_to_read(path("llmc"), "train", "gpt2", "c");
  const ShardSetSource source(files, 50257);
  EXPECT_EQ(document_starts(files, source, kGpt2EndOfText), (std::vector<std::int64_t>{0, 3, 7}));
  // A stream whose first token is not <|endoftext|> still starts a document there.
  write_token_shard(path("llmc/web_train_000000.bin"), std::vector<std::uint16_t>{9, 10, 50256, 12});
  const ShardSetSource cut(files, 50257);
  EXPECT_EQ(document_starts(files, cut, kGpt2EndOfText), (std::vector<std::int64_t>{0, 2, 6}));
}

// Links planted at an index's name: never read through (the loader refuses the link, naming
// it), never written through nor replaced by prepare (a new index's name taken while the run
// works fails the run, which removes all it moved), removed as an entry by --overwrite.
TEST_F(DocumentIndexFiles, APlantedLinkAtTheIndexNameIsRefused) {
  const PrepareSummary s = prepare();
  const std::string docs = document_index_name(s.train_shards.at(2));
  put(path("victim"), bytes_of(docs));  // the very bytes, so only the link can be refused
  fs::remove(docs);
  fs::create_symlink(path("victim"), docs);
  EXPECT_EQ(error_of([&] { starts("train"); }),
            docs + ": (file): is a symbolic link; plait never follows links inside its own directories");
  // --overwrite removes the old link as an entry; its target is untouched.
  const std::string victim = bytes_of(path("victim"));
  prepare();
  EXPECT_FALSE(fs::is_symlink(docs));
  EXPECT_EQ(bytes_of(path("victim")), victim);
  // A link appearing at a new index's name while the run works (this run cuts smaller shards:
  // 7, the last one new).
  PrepareOptions o;
  const fs::path planted = dir_ / "out" / "corpus_train_000006.docs";
  o.progress = [&](const PrepareProgress&) {
    if (!fs::is_symlink(planted)) fs::create_symlink(path("victim"), planted);
  };
  EXPECT_EQ(error_of([&] { prepare(o, 3); }),
            planted.string() + ": already exists; refusing to replace it (another run may have written it)");
  EXPECT_TRUE(fs::is_symlink(planted));
  EXPECT_EQ(bytes_of(path("victim")), victim);
}

}  // namespace
}  // namespace plait::data
