// `plait export hf` and `"init": {"from": "hf:DIR"}` through the binary: a run exported and
// started again from the export begins with exactly the parameters the checkpoint held (both
// families), and bad init sections or Hugging Face configs are one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "plait/checkpoint/checkpoint_store.h"
#include "support/run_command.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using plait::test::CommandResult;

class HfCli : public plait::test::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    std::ofstream(dir_ / "corpus.txt") << "The quick brown fox jumps over the lazy dog. " << std::string(3000, 'b');
  }
  fs::path write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }
  CommandResult run(const std::string& args) { return plait::test::run_plait(args, "OMP_NUM_THREADS=1"); }
  std::string data() const { return R"("data": {"paths": [")" + (dir_ / "corpus.txt").string() + R"("]})"; }
};

const char* kGpt2 = R"("model": {"layers": 2, "hidden": 16, "heads": 2, "vocab": 256, "max_seq": 32, "tie_embeddings": false})";
const char* kLlama = R"("model": {"family": "llama", "layers": 2, "hidden": 16, "heads": 4, "kv_heads": 2, "ffn_hidden": 24, "vocab": 256, "max_seq": 32})";

TEST_F(HfCli, ARunStartedFromItsExportBeginsWithTheCheckpointsParameters) {
  for (const char* model : {kGpt2, kLlama}) {
    fs::remove_all(dir_ / "ckpt");
    fs::remove_all(dir_ / "hf");
    fs::remove_all(dir_ / "ckpt2");
    const fs::path first = write("first.json", std::string("{") + model + R"(, "train": {"steps": 3, "seq": 16, "microbatch_size": 2}, )" +
                                                   data() + R"(, "checkpoint": {"dir": ")" + (dir_ / "ckpt").string() + R"("}})");
    ASSERT_EQ(run("train --config " + first.string()).status, 0);
    const CommandResult exported = run("export hf --checkpoint " + (dir_ / "ckpt").string() + " --out " + (dir_ / "hf").string());
    ASSERT_EQ(exported.status, 0) << exported.err;
    EXPECT_NE(exported.out.find("(step 3)"), std::string::npos) << exported.out;
    EXPECT_NE(exported.out.find("files: tokenizer.json, tokenizer_config.json, model.safetensors, config.json"),
              std::string::npos)
        << exported.out;
    // No model section: the model is config.json's; save_initial writes what the run starts from.
    const fs::path second = write("second.json", R"({"init": {"from": "hf:)" + (dir_ / "hf").string() +
                                                     R"("}, "train": {"steps": 1, "seq": 16, "microbatch_size": 2}, )" + data() +
                                                     R"(, "checkpoint": {"dir": ")" + (dir_ / "ckpt2").string() +
                                                     R"(", "save_initial": true}})");
    const CommandResult tuned = run("train --config " + second.string());
    ASSERT_EQ(tuned.status, 0) << tuned.err;
    EXPECT_NE(tuned.out.find("init: parameters from the Hugging Face model in " + (dir_ / "hf").string()), std::string::npos)
        << tuned.out;
    const plait::checkpoint::CheckpointReader trained((dir_ / "ckpt/step_00000003").string());
    const plait::checkpoint::CheckpointReader started((dir_ / "ckpt2/step_00000000").string());
    int compared = 0;
    for (const std::string& name : trained.tensor_names()) {
      if (name.ends_with(".adam_m") || name.ends_with(".adam_v")) continue;
      std::size_t n = 1;
      for (auto d : trained.shape(name)) n *= static_cast<std::size_t>(d);
      std::vector<float> a(n), b(n);
      trained.read(name, a);
      started.read(name, b);
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), n * sizeof(float))) << name;
      ++compared;
    }
    EXPECT_GT(compared, 10);
  }
}

TEST_F(HfCli, BadInitSectionsAndHuggingFaceConfigsAreOneLine) {
  fs::create_directories(dir_ / "m");
  std::ofstream(dir_ / "m/config.json") << R"({"model_type": "llama", "hidden_size": 16, "intermediate_size": 24,
      "num_hidden_layers": 1, "num_attention_heads": 2, "max_position_embeddings": 32, "vocab_size": 256,
      "rope_scaling": {"rope_type": "linear", "factor": 2.0}})";
  const std::string train = R"("train": {"steps": 1, "seq": 16, "microbatch_size": 2}, )" + data();
  struct Case {
    std::string config, says;
  };
  const std::string m = (dir_ / "m").string();
  const Case cases[] = {
      {R"({"init": {"from": ")" + m + R"("}, )" + train + "}", "init.from: expected \"hf:DIR\""},
      {R"({"init": {"from": "hf:)" + m + R"("}, )" + train + "}", m + "/config.json: rope_scaling: {\"factor\":2.0,\"rope_type\":\"linear\"}: plait implements plain rotary positions"},
      {R"({"init": {"from": "hf:)" + (dir_ / "none").string() + R"("}, )" + train + "}", (dir_ / "none").string() + "/config.json: (file): cannot open"},
      {R"({"init": {"from": "hf:x", "strict": true}, )" + train + "}", "init.strict: unknown field"},
  };
  for (const Case& c : cases) {
    const fs::path file = write("bad.json", c.config);
    const CommandResult r = run("train --config " + file.string());
    EXPECT_EQ(r.status, 1) << c.config;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
  // A model section that disagrees with config.json names the field.
  std::ofstream(dir_ / "m/config.json") << R"({"model_type": "llama", "hidden_size": 16, "intermediate_size": 24,
      "num_hidden_layers": 1, "num_attention_heads": 2, "max_position_embeddings": 32, "vocab_size": 256})";
  std::ofstream(dir_ / "m/model.safetensors") << "not read";
  const fs::path file = write("bad.json", R"({"init": {"from": "hf:)" + m + R"("}, "model": {"family": "llama", "layers": 2,
      "hidden": 16, "heads": 2, "ffn_hidden": 24, "vocab": 256, "max_seq": 32, "norm_eps": 1e-6}, )" + train + "}");
  const CommandResult r = run("train --config " + file.string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find(file.string() + ": model.layers: 2, but " + m + "/config.json (init.from) says 1"), std::string::npos)
      << r.err;
}

}  // namespace
