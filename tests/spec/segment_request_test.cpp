#include "plait/spec/sequence_partition.h"

#include <gtest/gtest.h>

namespace plait::spec {
namespace {

// The lengths a train section asks for, cut evenly (the default split).
std::vector<std::int64_t> read(const std::string& train) {
  const nlohmann::json doc = nlohmann::json::parse(R"({"train": )" + train + "}");
  const SegmentRequest r = read_segment_request(JsonFields(doc, "t.json").object("train"), 12);
  return cut_sequence(gpt2_model(1, 8, 2, 16, 12), 12, r).lengths;
}

std::string error_of(const std::string& train) {
  try {
    read(train);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// The whole remainder goes to the first segment (thunlp/Seq1F1B split_solver.py), not one token
// to each of the first seq % k segments.
TEST(SegmentRequest, EvenSplitPutsTheRemainderOnTheFirstSegment) {
  EXPECT_EQ(even_lengths(10, 4), (std::vector<std::int64_t>{4, 2, 2, 2}));
  EXPECT_EQ(even_lengths(12, 3), (std::vector<std::int64_t>{4, 4, 4}));
  EXPECT_EQ(even_lengths(5, 1), (std::vector<std::int64_t>{5}));
  EXPECT_EQ(even_lengths(3, 3), (std::vector<std::int64_t>{1, 1, 1}));
  EXPECT_THROW(even_lengths(3, 4), Error);
  EXPECT_THROW(even_lengths(3, 0), Error);
}

TEST(SegmentRequest, ReadsACountOrTheLengths) {
  EXPECT_EQ(read(R"({"seq": 12})"), (std::vector<std::int64_t>{12}));
  EXPECT_EQ(read(R"({"segments": 1})"), (std::vector<std::int64_t>{12}));
  EXPECT_EQ(read(R"({"segments": 5})"), (std::vector<std::int64_t>{4, 2, 2, 2, 2}));
  EXPECT_EQ(read(R"({"segments": [7, 5]})"), (std::vector<std::int64_t>{7, 5}));
}

TEST(SegmentRequest, ErrorsNameTheFieldAndWhatWasExpected) {
  EXPECT_EQ(error_of(R"({"segments": [7, 4]})"),
            "t.json: train.segments: segment lengths sum to 11, expected train.seq 12");
  EXPECT_EQ(error_of(R"({"segments": [13, -1]})"), "t.json: train.segments: segment lengths must be >= 1");
  EXPECT_EQ(error_of(R"({"segments": 13})"), "t.json: train.segments: expected an integer in [1, 12], found 13");
  EXPECT_EQ(error_of(R"({"segments": 0})"), "t.json: train.segments: expected an integer in [1, 12], found 0");
  EXPECT_EQ(error_of(R"({"segments": [6, "6"]})").rfind("t.json: train.segments[1]: ", 0), 0u);
}

}  // namespace
}  // namespace plait::spec
