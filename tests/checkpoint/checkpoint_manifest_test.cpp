#include "plait/checkpoint/checkpoint_manifest.h"

#include <gtest/gtest.h>

#include "plait/core/error.h"

namespace plait::checkpoint {
namespace {

std::string parse_error(const nlohmann::json& j) {
  try {
    parse_manifest(j.dump(), "m.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CheckpointManifest, RoundTripsAndRejectsEachKindOfMistake) {
  CheckpointManifest m;
  m.step = 42;
  m.config = {{"d_model", 64}};
  m.data_position = {{"sample", 99}};
  m.rng_state = {{"seed", 7}};
  m.files = {{"stage_0.safetensors", 1024, 0xdeadbeef, {"wte", "h.0.attn.c_attn.weight"}},
             {"stage_1.safetensors", 2048, 0x00000001, {"lm_head"}}};
  const CheckpointManifest back = parse_manifest(manifest_to_text(m), "m.json");
  EXPECT_EQ(back.step, 42);
  EXPECT_EQ(back.config, m.config);
  EXPECT_EQ(back.files[0].crc32c, 0xdeadbeefu);
  EXPECT_EQ(back.files[1].tensors, m.files[1].tensors);

  const nlohmann::json good = nlohmann::json::parse(manifest_to_text(m));
  EXPECT_EQ(parse_error(good), "(no error)");
  auto with = [&](const nlohmann::json::json_pointer& p, const nlohmann::json& v) {
    nlohmann::json j = good;
    j[p] = v;
    return parse_error(j);
  };
  using P = nlohmann::json::json_pointer;
  EXPECT_EQ(with(P("/format"), "other"), "m.json: format: expected \"plait-checkpoint\", found \"other\"");
  EXPECT_EQ(with(P("/version"), 2), "m.json: version: expected an integer in [1, 1], found 2");
  EXPECT_EQ(with(P("/step"), -1), "m.json: step: expected an integer in [0, 9223372036854775807], found -1");
  EXPECT_EQ(with(P("/files/0/crc32c"), "0xDEADBEEF"), "m.json: files[0].crc32c: expected \"0x\" and 8 lower-case hex digits, found \"0xDEADBEEF\"");
  EXPECT_EQ(with(P("/files/0/path"), "a/b"), "m.json: files[0].path: expected a plain file name inside the checkpoint directory, found \"a/b\"");
  EXPECT_EQ(with(P("/files/1/path"), "stage_0.safetensors"), "m.json: files[1].path: \"stage_0.safetensors\" is listed twice (also files[0])");
  EXPECT_EQ(with(P("/files/1/tensors/0"), "wte"), "m.json: files[1].tensors[0]: tensor \"wte\" is listed twice (also files[0].tensors[0])");
  EXPECT_EQ(with(P("/files/0/bytes"), 3), "m.json: files[0].bytes: expected an integer in [8, 9223372036854775807], found 3");
  EXPECT_EQ(with(P("/files/0/extra"), 1), "m.json: files[0].extra: unknown field");
  EXPECT_EQ(with(P("/extra"), 1), "m.json: extra: unknown field");
  nlohmann::json no_rng = good;
  no_rng.erase("rng_state");
  EXPECT_EQ(parse_error(no_rng), "m.json: rng_state: missing");
  EXPECT_EQ(with(P("/files"), 5), "m.json: files: expected an array of files");
  // A number beyond a double (fuzz/regressions/json_fields) is an InputError, not a crash.
  try {
    parse_manifest("{\"step\": 1e999}", "m.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "m.json: step: 1e999 is beyond the range of a double (about 1.8e308 in magnitude)");
  }
}

}  // namespace
}  // namespace plait::checkpoint
