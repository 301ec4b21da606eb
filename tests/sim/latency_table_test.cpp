#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "plait/core/error.h"
#include "plait/sim/latency_table.h"
#include "plait/spec/model_presets.h"
#include "plait/sim/zorse_profiles.h"

namespace plait::sim {
namespace {

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / ("plait_latency_" + name)).string();
  std::ofstream(path) << text;
  return path;
}

std::string error_of(const std::string& path) {
  try {
    read_latency_table(path, true);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const spec::ModelSpec kSmall = spec::gpt2_model(4, 128, 4, 256, 128);

// A profile of this machine in Zorse's shape: one model, read strictly; the profile reproduces
// the fit for the whole sequence it was measured at (FLOPs from the planned shape).
TEST(LatencyTable, ReadsAProfileAndReproducesItsFit) {
  const std::string path = write_file("cpu.json", R"({"tiny": {"cpu": {"128": {"float32":
      [[2.0, 0.5], [4.0, 1.0], [2.5, 4.5, 6.5], [5.0, 9.0, 13.0]]}}}})");
  const LatencyTable t = read_latency_table(path, true);
  ASSERT_EQ(t.entries.size(), 1u);
  EXPECT_EQ(t.entries[0].seq, 128);
  EXPECT_EQ(t.entries[0].forward_ms.size(), 3u);
  const DeviceProfile d = measured_device_profile(t, nullptr, "cpu", "float32", kSmall, {}, "cpu");
  ASSERT_TRUE(d.measured.has_value());
  const double flops = kSmall.layer_forward_flops(128);
  EXPECT_NEAR(d.forward_seconds(1, 3 * flops, 0), 3 * 2.0e-3 + 0.5e-3, 1e-12);  // b = 3
  EXPECT_NE(d.source.find("planned model's shape"), std::string::npos);
  // The writer round-trips.
  const std::string again = write_file("again.json", latency_table_json(t.entries).dump());
  EXPECT_EQ(read_latency_table(again, true).entries[0].backward_ms, t.entries[0].backward_ms);
  EXPECT_THROW(measured_device_profile(t, nullptr, "gpu", "float32", kSmall, {}, "x"), Error);
  EXPECT_THROW(measured_device_profile(t, nullptr, "cpu", "float16", kSmall, {}, "x"), Error);
}

TEST(LatencyTable, StrictErrorsNameFileAndEntry) {
  EXPECT_NE(error_of(write_file("e1.json", R"({"m": {"cpu": {"x": {}}}})")).find("m.cpu.x: expected a sequence length"),
            std::string::npos);
  EXPECT_NE(error_of(write_file("e2.json", R"({"m": {"cpu": {"64": {"float32": [[1, 0]]}}}})"))
                .find("m.cpu.64.float32: expected [[f_slope"),
            std::string::npos);
  EXPECT_NE(error_of(write_file("e3.json", R"({"m": {"cpu": {"64": {"float32": [[-1, 0], [1, 0]]}}}})"))
                .find("positive slopes"),
            std::string::npos);
  EXPECT_NE(error_of(write_file("e4.json", R"({"m": []})")).find("plait_latency_e4.json: m: expected a JSON object"),
            std::string::npos);
  EXPECT_NE(error_of(write_file("e5.json", "{}")).find("no measurements"), std::string::npos);
  // Found by fuzz_latency_table: "0512" beside "512" made two entries for one sequence length.
  EXPECT_NE(error_of(write_file("e6.json", R"({"m": {"d": {"512": {"float16": [[20.0, 1.0], [40.0, 2.0]]},
                                                          "0512": {"float16": [[0.5, 0.25], [1.0, 0.5]]}}}})"))
                .find("m.d.0512: expected a sequence length without leading zeros"),
            std::string::npos);
}

TEST(LatencyTable, FitsALineLikeZorse) {
  const auto [slope, intercept] = fit_latency_line({3.0, 5.0, 7.0, 9.0});
  EXPECT_NEAR(slope, 2.0, 1e-12);
  EXPECT_NEAR(intercept, 1.0, 1e-12);
}

// The planner's llama-7b asks for deepspeedllama_7b at the planned sequence: 1024 exists for all
// four GPU types of the acceptance cluster, 4096 too; without a preference the longest wins.
TEST(LatencyTable, PreferredModelAndSequence) {
  const spec::NamedModel llama = spec::resolve_model("llama-7b", 1024);
  EXPECT_EQ(llama.profile_model, "deepspeedllama_7b");
  EXPECT_FALSE(llama.model.tie_embeddings);
  EXPECT_EQ(llama.model.vocab, 32000);
  for (const char* gpu : {"a100x40", "a10g", "v100x16", "t4"}) {
    for (std::int64_t seq : {1024, 4096}) {
      const DeviceProfile d = zorse_device_profile(gpu, "float16", llama.model, {llama.profile_model, seq});
      EXPECT_EQ(d.measured->model, "deepspeedllama_7b") << gpu;
      EXPECT_EQ(d.measured->seq, seq) << gpu;
    }
  }
  // 3000 is closer to 4096 than to 2048 by ratio (a100x40 has 1024, 2048, 4096).
  EXPECT_EQ(zorse_device_profile("a100x40", "float16", llama.model, {llama.profile_model, 3000}).measured->seq, 4096);
  EXPECT_EQ(zorse_device_profile("a100x40", "float16", llama.model, {llama.profile_model, 1500}).measured->seq, 2048);
  // The measured fit comes back for a whole micro-batch of the measured sequence (within the
  // 0.1% by which plait's FLOPs formula, attention included, differs from Zorse's
  // 2 * seq * parameters + 2 * hidden * seq^2).
  const DeviceProfile t4 = zorse_device_profile("t4", "float16", llama.model, {llama.profile_model, 1024});
  const double flops = llama.model.layer_forward_flops(1024);
  const double fitted = t4.measured->forward.at(2.0);
  EXPECT_NEAR(t4.forward_seconds(1, 2 * flops, 0) / fitted, 1.0, 0.01);
}

}  // namespace
}  // namespace plait::sim
