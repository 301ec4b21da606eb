// Resumes that change the recipe (runtime/resume_recipe.h, docs/checkpoints.md "What a resume
// may change"): a checkpoint of a pp 2 run is resumed by one process (--pp 1: the layout is free)
// with one field of the config changed at a time, with and without --allow-recipe-change:
//
//   model                                   refused, naming the field of this run's config, even
//                                           with the flag
//   optimizer, learning-rate schedule,      refused naming every change; with the flag resumed,
//   batch, seed, data (by content)          each change printed (the seed then honoured)
//   validation, segments, checkpointing,    resumed, nothing printed
//   the data's path (a moved dataset)
#include <functional>

#include "train_cli_fixture.h"

namespace {

using namespace plait_train_cli;

class TrainRecipeCli : public TrainCheckpointCli {
 protected:
  // config(name) with `edit` applied to its JSON, checkpointing into its own directory.
  fs::path variant(const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    const fs::path p = config(name);
    nlohmann::json j = nlohmann::json::parse(slurp(p));
    edit(j);
    std::ofstream(p, std::ios::trunc) << j.dump(2);
    return p;
  }
  // One process resuming the base run's step_00000002 with `cfg`, one step.
  Result resume(const fs::path& cfg, bool allow) {
    return train(0, "--config " + cfg.string() + " --pp 1 --stop-at 3 --resume " + (base_ / "step_00000002").string() +
                        (allow ? " --allow-recipe-change" : ""));
  }
  void SetUp() override {
    TrainCheckpointCli::SetUp();
    const fs::path cfg = config("base.json");
    base_ = fs::path(cfg).replace_extension("ckpt");
    const Result r = train(2, "--config " + cfg.string() + " --stop-at 2");
    ASSERT_EQ(job_status(r).first, 0) << r.err;
  }
  fs::path base_;
};

struct RecipeCase {
  const char* name;
  std::function<void(nlohmann::json&)> edit;
  const char* change;  // as the refusal lists it; "" for a free change
};

TEST_F(TrainRecipeCli, RecipeChangesAreRefusedUnlessAllowedThenPrinted) {
  const RecipeCase cases[] = {
      // min_lr defaults to lr / 10: it changes with lr, and the refusal says so.
      {"lr", [](nlohmann::json& j) { j["train"]["lr"] = 0.001; },
       "train.lr 0.003 -> 0.001 (the learning-rate schedule), train.min_lr 0.0003 -> 0.0001 (the learning-rate "
       "schedule)"},
      // Just enough digits to tell the values apart (0.003 / 10 is not the double 0.0003).
      {"min_lr", [](nlohmann::json& j) { j["train"]["min_lr"] = 0.0003; },
       "train.min_lr 0.00030000000000000003 -> 0.0003 (the learning-rate schedule)"},
      {"steps", [](nlohmann::json& j) { j["train"]["steps"] = 8; }, "train.steps 6 -> 8 (the learning-rate schedule)"},
      {"warmup", [](nlohmann::json& j) { j["train"]["warmup_steps"] = 2; },
       "train.warmup_steps 0 -> 2 (the learning-rate schedule)"},
      {"beta2", [](nlohmann::json& j) { j["train"]["beta2"] = 0.99; }, "train.beta2 0.95 -> 0.99 (the optimizer)"},
      {"beta1", [](nlohmann::json& j) { j["train"]["beta1"] = 0.8; }, "train.beta1 0.9 -> 0.8 (the optimizer)"},
      {"wd", [](nlohmann::json& j) { j["train"]["weight_decay"] = 0.01; },
       "train.weight_decay 0.1 -> 0.01 (the optimizer)"},
      {"eps", [](nlohmann::json& j) { j["train"]["eps"] = 0.002; }, "train.eps 0.001 -> 0.002 (the optimizer)"},
      {"clip", [](nlohmann::json& j) { j["train"]["grad_clip"] = 0.5; }, "train.grad_clip 1 -> 0.5 (the optimizer)"},
      {"microbatches", [](nlohmann::json& j) { j["train"]["microbatches"] = 2; },
       "train.microbatches (micro-batches per step, all replicas) 4 -> 2 (the batch)"},
      {"mbs", [](nlohmann::json& j) { j["train"]["microbatch_size"] = 1; }, "train.microbatch_size 2 -> 1 (the batch)"},
      {"seed", [](nlohmann::json& j) { j["train"]["seed"] = 7; }, "train.seed 1234 -> 7 (the seed)"},
  };
  // Each change alone is refused, naming it; nothing is written.
  for (const RecipeCase& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path cfg = variant(std::string(c.name) + ".json", c.edit);
    const Result refused = resume(cfg, false);
    EXPECT_EQ(job_status(refused).first, 1) << refused.err;
    EXPECT_EQ(count_of(refused.err, "plait: error:"), 1u) << refused.err;
    EXPECT_NE(refused.err.find("plait: error: " + cfg.string() + ": "), std::string::npos) << refused.err;
    EXPECT_NE(refused.err.find("would change the training recipe: " + std::string(c.change) +
                               " (the checkpoint's value -> this run's); set them back, or pass --allow-recipe-change"),
              std::string::npos)
        << refused.err;
    EXPECT_FALSE(fs::exists(fs::path(cfg).replace_extension("ckpt") / "step_00000003"));
  }
  // All of them at once (but min_lr, whose case only pins the digits), allowed: the run
  // continues, every change printed on a line of its own ("train.lr 0.003 -> 0.001, the
  // learning-rate schedule").
  const fs::path all = variant("all.json", [&](nlohmann::json& j) {
    for (const RecipeCase& c : cases) {
      if (std::string(c.name) != "min_lr") c.edit(j);
    }
  });
  const Result allowed = resume(all, true);
  ASSERT_EQ(job_status(allowed).first, 0) << allowed.err;
  for (const RecipeCase& c : cases) {
    if (std::string(c.name) == "min_lr") continue;
    const std::string first = std::string(c.change).substr(0, std::string(c.change).find(" (the "));
    EXPECT_NE(allowed.out.find("resume: recipe change (--allow-recipe-change): " + first + ", the "), std::string::npos)
        << c.name << "\n" << allowed.out;
  }
  EXPECT_TRUE(fs::exists(dir_ / "all.ckpt" / "step_00000003" / "manifest.json"));
  // The seed allowed to change is honoured: the new checkpoint records it as its RNG state and
  // config (never the old RNG state beside the new config).
  const nlohmann::json seeded = nlohmann::json::parse(slurp(dir_ / "all.ckpt" / "step_00000003" / "manifest.json"));
  EXPECT_EQ(seeded.at("rng_state").at("seed"), 7);
  EXPECT_EQ(seeded.at("config").at("train").at("seed"), 7);

  // Several changes at once: all listed in the one line.
  const fs::path two = variant("two.json", [](nlohmann::json& j) {
    j["train"]["lr"] = 0.001;
    j["train"]["beta2"] = 0.99;
  });
  const Result r = resume(two, false);
  EXPECT_NE(r.err.find("train.beta2 0.95 -> 0.99 (the optimizer), train.lr 0.003 -> 0.001 (the learning-rate schedule)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(count_of(r.err, "plait: error:"), 1u) << r.err;
}

TEST_F(TrainRecipeCli, TheModelMayNeverChangeAndTheErrorNamesTheField) {
  const std::pair<const char*, std::function<void(nlohmann::json&)>> cases[] = {
      {"layers", [](nlohmann::json& j) { j["model"]["layers"] = 2; }},
      {"hidden", [](nlohmann::json& j) { j["model"]["hidden"] = 64; }},
  };
  for (const auto& [field, edit] : cases) {
    SCOPED_TRACE(field);
    const fs::path cfg = variant(std::string(field) + ".json", edit);
    for (const bool allow : {false, true}) {
      const Result r = resume(cfg, allow);
      EXPECT_EQ(job_status(r).first, 1) << r.err;
      const bool layers = std::string(field) == "layers";
      EXPECT_NE(r.err.find("plait: error: " + cfg.string() + ": model." + field + ": " + (layers ? "2" : "64") + ", but the checkpoint " +
                           (base_ / "step_00000002" / "manifest.json").string() + " was written by a model with " +
                           (layers ? "4" : "32") +
                           (layers ? "" : "; model.ffn_hidden 256 (the checkpoint's 128)") +
                           "; a checkpoint loads only into the model it was written for"),
                std::string::npos)
          << r.err;
    }
  }
}

TEST_F(TrainRecipeCli, LayoutValidationAndCheckpointSettingsAreFree) {
  const fs::path cfg = variant("free.json", [](nlohmann::json& j) {
    j["train"]["eval_every"] = 1;
    j["train"]["segments"] = 1;
    j["train"]["on_nonfinite"] = "skip";
    j["train"]["stall_timeout_s"] = 60;
    j["checkpoint"]["keep_last"] = 1;
  });
  const Result r = resume(cfg, false);
  ASSERT_EQ(job_status(r).first, 0) << r.err;
  EXPECT_EQ(r.out.find("recipe change"), std::string::npos) << r.out;
}

// Data is compared by content: the same shards elsewhere resume; shards of another text (one byte
// changed, so as many tokens) are refused naming the first that differs, or continued with the
// flag at the same position.
TEST_F(TrainRecipeCli, DataIsComparedByItsChecksumsNotItsPath) {
  fs::copy(dir_ / "shards", dir_ / "moved", fs::copy_options::recursive);
  const fs::path moved = variant("moved.json", [&](nlohmann::json& j) { j["data"]["shards"] = (dir_ / "moved").string(); });
  const Result m = resume(moved, false);
  ASSERT_EQ(job_status(m).first, 0) << m.err;
  EXPECT_EQ(m.out.find("data change"), std::string::npos) << m.out;

  std::string text = slurp(dir_ / "corpus.txt");
  text[text.size() / 2] = text[text.size() / 2] == 'a' ? 'b' : 'a';
  fs::create_directories(dir_ / "other");
  std::ofstream(dir_ / "other" / "corpus.txt") << text;
  const Result prep = plait("data prepare --tokenizer byte --quiet --shard-tokens 30000 --out " + (dir_ / "other_shards").string() +
                            " " + (dir_ / "other" / "corpus.txt").string());
  ASSERT_EQ(prep.status, 0) << prep.err;
  const fs::path other =
      variant("other.json", [&](nlohmann::json& j) { j["data"]["shards"] = (dir_ / "other_shards").string(); });
  const Result refused = resume(other, false);
  EXPECT_EQ(job_status(refused).first, 1) << refused.err;
  EXPECT_NE(refused.err.find("plait: error: " + other.string() + ": data.shards: source "), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find(" here, but the checkpoint's run read corpus_train_"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("data is compared by content, so a moved dataset is fine"), std::string::npos) << refused.err;
  const Result allowed = resume(other, true);
  ASSERT_EQ(job_status(allowed).first, 0) << allowed.err;
  EXPECT_NE(allowed.out.find("resume: data change (--allow-recipe-change): source "), std::string::npos) << allowed.out;
}

}  // namespace
