// TrainingData with data.packing "documents" over shards plait data prepare wrote: both splits
// packed from the shards' document indexes, the state a checkpoint records carries the layout,
// and a run resumed from it reads the same micro-batches and documents bit for bit.
#include "plait/runtime/training_data.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "plait/core/error.h"
#include "plait/data/shard_preparer.h"
#include "support/temp_dir.h"

namespace plait::runtime {
namespace {
namespace fs = std::filesystem;

class PackedTrainingData : public test::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    // 60 documents of 3 to 76 bytes (one line each).
    fs::create_directories(dir_ / "in");
    for (int i = 0; i < 60; ++i) {
      char name[16];
      std::snprintf(name, sizeof name, "doc%02d.txt", i);
      put(path("in/") + name, std::string(static_cast<std::size_t>(2 + (i * 37) % 75), static_cast<char>('a' + i % 26)) + "\n");
    }
    data::PrepareOptions o;
    o.tokenizer = "byte";
    o.out_dir = path("out");
    o.shard_tokens = 300;
    o.val_fraction = 0.2;
    data::prepare_token_shards({path("in")}, o);
  }
  RunConfig config(const std::string& packing) const {
    return parse_run_config(nlohmann::json::parse(R"({"model": {"layers": 1, "hidden": 16, "heads": 2, "vocab": 256,
        "max_seq": 32}, "train": {"steps": 40, "seq": 32, "microbatch_size": 2, "microbatches": 3, "eval_every": 5},
        "data": {"shards": ")" + path("out") + R"(", "tokenizer": "byte", "packing": ")" + packing + R"("}})"),
                            "cfg.json");
  }
};

TEST_F(PackedTrainingData, AResumedRunReadsTheSameMicrobatchesAndDocuments) {
  const RunConfig run = config("documents");
  const TrainingData first(run, run.train);
  EXPECT_NE(first.describe().find("whole documents into"), std::string::npos) << first.describe();
  ASSERT_NE(first.validation(), nullptr);
  EXPECT_GT(first.validation()->documents(0, 0).at(0).tokens, 0);
  const nlohmann::json state = nlohmann::json::parse(first.state(7).dump());
  EXPECT_EQ(state["packing"], "documents");
  const TrainingData resumed(run, run.train, DataResume{state, first.rng_state(), "ckpt/manifest.json", false});
  std::vector<std::int32_t> x1(64), y1(64), x2(64), y2(64);
  for (std::int64_t step = 7; step < 40; ++step) {
    for (int g = 0; g < 3; ++g) {
      first.train().fill(step, g, x1.data(), y1.data());
      resumed.train().fill(step, g, x2.data(), y2.data());
      ASSERT_EQ(x1, x2) << "step " << step;
      ASSERT_EQ(y1, y2) << "step " << step;
      ASSERT_EQ(first.train().documents(step, g), resumed.train().documents(step, g));
    }
  }
  // Packed rows hold whole documents: each one that starts a row (not a continuation) starts
  // at a line's first byte, right after the previous document's newline in the stream.
  int boundaries = 0;
  for (int g = 0; g < 3; ++g) {
    first.train().fill(11, g, x1.data(), y1.data());
    const auto docs = first.train().documents(11, g);
    for (int b = 0; b < 2; ++b) {
      for (std::size_t j = 1; j < docs[b].starts.size(); ++j, ++boundaries) {
        EXPECT_EQ(x1[b * 32 + docs[b].starts[j] - 1], '\n');
      }
    }
  }
  EXPECT_GT(boundaries, 0);
  // The same checkpoint resumed as a stream is refused by name.
  const RunConfig stream = config("stream");
  try {
    TrainingData other(stream, stream.train, DataResume{state, first.rng_state(), "ckpt/manifest.json", false});
    FAIL() << "resumed a packed checkpoint as a stream";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ckpt/manifest.json: data_position.packing: the checkpoint's run read"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace plait::runtime
