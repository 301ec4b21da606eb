// data.packing "documents": whole documents packed greedily into sequences with padding, a
// document longer than seq split (each piece a document of its own), the loader's rows and the
// documents it reports, and a resume that reads the same sequences bit for bit.
#include "plait/data/packed_sequences.h"

#include <gtest/gtest.h>

#include <numeric>

#include "plait/core/error.h"
#include "plait/core/splitmix64.h"
#include "plait/data/document_lengths.h"
#include "plait/data/sequential_loader.h"
#include "same_batches.h"

namespace plait::data {
namespace {

std::vector<std::uint16_t> iota_tokens(int n) {
  std::vector<std::uint16_t> t(static_cast<std::size_t>(n));
  std::iota(t.begin(), t.end(), 0);
  return t;
}

std::vector<std::pair<std::int64_t, std::int32_t>> layout(const PackedSequences& p) {
  std::vector<std::pair<std::int64_t, std::int32_t>> out;
  for (std::int64_t i = 0; i < p.size(); ++i) out.emplace_back(p.at(i).start, p.at(i).tokens);
  return out;
}

// 21 tokens, so 20 inputs; documents of 3, 5, 2, 7 and 3 tokens; seq 6.
TEST(PackedSequences, PacksWholeDocumentsGreedilyInOrderPaddingTheRoomANextOneDoesNotFit) {
  const PackedSequences p({0, 3, 8, 10, 17}, 21, 6);
  // [0,3) pads 3 (the next document, 5, does not fit the 3 left); [3,8) pads 1; the 7-token
  // document is longer than seq: it fills the room after the 2-token one, and its last 3 tokens
  // share the next sequence with the last document.
  EXPECT_EQ(layout(p), (std::vector<std::pair<std::int64_t, std::int32_t>>{{0, 3}, {3, 5}, {8, 6}, {14, 6}}));
  EXPECT_EQ(p.padding_tokens(), 4);
  EXPECT_EQ(p.document_count(), 5);
  EXPECT_EQ(p.documents(0), (SequenceDocuments{{0}, 3, false}));
  EXPECT_EQ(p.documents(1), (SequenceDocuments{{0}, 5, false}));
  EXPECT_EQ(p.documents(2), (SequenceDocuments{{0, 2}, 6, false}));
  // Starts with the 7-token document's continuation: a document of its own, positions from 0.
  EXPECT_EQ(p.documents(3), (SequenceDocuments{{0, 3}, 6, true}));
}

TEST(PackedSequences, SplitsADocumentLongerThanSeqIntoPiecesThatEachStartASequence) {
  // One document of 15 inputs (16 tokens), seq 6: pieces of 6, 6 and 3, positions restarting.
  const PackedSequences p({0}, 16, 6);
  EXPECT_EQ(layout(p), (std::vector<std::pair<std::int64_t, std::int32_t>>{{0, 6}, {6, 6}, {12, 3}}));
  EXPECT_EQ(p.documents(0), (SequenceDocuments{{0}, 6, false}));
  EXPECT_EQ(p.documents(1), (SequenceDocuments{{0}, 6, true}));
  EXPECT_EQ(p.documents(2), (SequenceDocuments{{0}, 3, true}));
  // Starts past the inputs (the stream's last token) are dropped; bad starts are refused.
  EXPECT_EQ(PackedSequences({0, 15}, 16, 6).document_count(), 1);
  EXPECT_THROW(PackedSequences({1, 4}, 16, 6), Error);
  EXPECT_THROW(PackedSequences({0, 4, 4}, 16, 6), Error);
}

TEST(PackedSequences, TheLoaderFillsDocumentsThenPaddingAndReportsEachRowsDocuments) {
  const auto tokens = iota_tokens(21);
  const TokenSpanSource src(tokens);
  const PackedSequences p({0, 3, 8, 10, 17}, 21, 6);
  const SequentialLoader loader(src, 6, 2, MicrobatchShares({1}), {}, &p);
  EXPECT_EQ(loader.samples_per_epoch(), 4);
  std::vector<std::int32_t> x(12), y(12);
  loader.fill(0, 0, x.data(), y.data());  // sequences 0 and 1
  const int P = kPaddingInput, T = kPaddingTarget;
  EXPECT_EQ(x, (std::vector<std::int32_t>{0, 1, 2, P, P, P, 3, 4, 5, 6, 7, P}));
  // The last target of each sequence is the next document's first token (as in stream mode).
  EXPECT_EQ(y, (std::vector<std::int32_t>{1, 2, 3, T, T, T, 4, 5, 6, 7, 8, T}));
  loader.fill(1, 0, x.data(), y.data());  // sequences 2 and 3
  EXPECT_EQ(x, (std::vector<std::int32_t>{8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}));
  EXPECT_EQ(y.back(), 20);
  EXPECT_EQ(loader.documents(1, 0), (std::vector<SequenceDocuments>{{{0, 2}, 6, false}, {{0, 3}, 6, true}}));
  loader.fill(2, 0, x.data(), y.data());  // the next epoch starts over
  EXPECT_EQ(x[6], 3);
  EXPECT_EQ(loader.documents(2, 0).at(1), (SequenceDocuments{{0}, 5, false}));
  // Without packing, a row is one document of seq tokens.
  const SequentialLoader stream(src, 6, 2, MicrobatchShares({1}));
  EXPECT_EQ(stream.documents(0, 0), (std::vector<SequenceDocuments>(2, SequenceDocuments{{0}, 6, false})));
  // Sequences packed for another seq or stream are refused.
  EXPECT_THROW(SequentialLoader(src, 8, 2, MicrobatchShares({1}), {}, &p), Error);
}

// Documents of a long-tailed length (a few tokens to several sequences), `n` tokens in all.
std::vector<std::int64_t> long_tailed_starts(std::int64_t n, std::uint64_t seed) {
  std::vector<std::int64_t> starts = {0};
  for (std::uint64_t i = 0;; ++i) {
    const std::uint64_t r = splitmix64(seed ^ splitmix64(i));
    const std::int64_t length = 1 + static_cast<std::int64_t>((r % 1000) * (r % 1000) / 3000);  // 1 .. 333
    if (starts.back() + length >= n) break;
    starts.push_back(starts.back() + length);
  }
  return starts;
}

TEST(PackedSequences, AResumedLoaderReadsTheSameSequencesBitForBit) {
  std::vector<std::uint16_t> tokens(20000);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::uint16_t>(splitmix64(i) % 50257);
  const TokenSpanSource src(tokens);
  const std::vector<std::int64_t> starts = long_tailed_starts(20000, 7);
  const PackedSequences packed(starts, src.size(), 64);
  ASSERT_GT(packed.size(), 100);
  ASSERT_LT(packed.size(), 55 * 3 * 2);  // the steps below run past the end of the epoch
  const MicrobatchShares shares({2, 1});
  const SequentialLoader first(src, 64, 2, shares, {}, &packed);
  // The checkpoint before step 5, through its text form as a manifest holds it.
  const nlohmann::json state = nlohmann::json::parse(first.state(5).dump());
  EXPECT_EQ(state["packing"], "documents");
  EXPECT_EQ(state["sequences"], packed.size());
  // The resumed run rebuilds its packing from the same data, with other shares.
  const PackedSequences again(starts, src.size(), 64);
  const DataPosition at = SequentialLoader::position_from_state(state, src, 64, "ckpt/manifest.json", &again);
  EXPECT_EQ(at, (DataPosition{5, 30}));
  const SequentialLoader resumed(src, 64, 2, MicrobatchShares({1, 1, 1}), at, &again);
  test::expect_same_batches(first, resumed, 5, 60, 3, 128);
  // Another layout (two documents made one), or a stream checkpoint, is refused by name.
  std::vector<std::int64_t> moved = starts;
  moved.erase(moved.begin() + 5);
  const PackedSequences other(moved, src.size(), 64);
  try {
    SequentialLoader::position_from_state(state, src, 64, "ckpt/manifest.json", &other);
    FAIL() << "resumed over another layout";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ckpt/manifest.json: data_position.layout_crc32c: the checkpoint's run packed "),
              std::string::npos)
        << e.what();
  }
  const nlohmann::json stream_state = SequentialLoader(src, 64, 2, shares).state(5);
  EXPECT_THROW(SequentialLoader::position_from_state(stream_state, src, 64, "m.json", &again), InputError);
  try {
    SequentialLoader::position_from_state(state, src, 64, "m.json");
    FAIL() << "a packed checkpoint resumed as a stream";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "m.json: data_position.packing: the checkpoint's run read \"documents\" sequences, this run reads "
              "\"stream\" (data.packing); resuming would read other sequences");
  }
}

TEST(DocumentLengths, CountsLengthsInLog2Buckets) {
  const DocumentLengths d = document_lengths(std::vector<std::int64_t>{0, 1, 3, 7, 15, 16}, 1040);
  // 1, 2, 4, 8, 1, 1024
  EXPECT_EQ(d.count, 6);
  EXPECT_EQ(d.tokens, 1040);
  EXPECT_EQ(d.longest, 1024);
  EXPECT_EQ(d.buckets, (std::vector<std::int64_t>{2, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1}));
  const std::vector<std::string> lines = d.lines();
  ASSERT_EQ(lines.size(), 11u);
  EXPECT_NE(lines[0].find("1-1"), std::string::npos);
  EXPECT_NE(lines[10].find("1024-2047"), std::string::npos);
  EXPECT_THROW(DocumentLengths().add(0), Error);
}

}  // namespace
}  // namespace plait::data
