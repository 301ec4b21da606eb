#include "plait/checkpoint/hf_weight_files.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "plait/core/bf16.h"
#include "plait/core/directory.h"
#include "plait/core/error.h"
#include "plait/core/fp16.h"
#include "support/raw_safetensors.h"
#include "support/temp_dir.h"

namespace plait::checkpoint {
namespace {

using test::RawTensor;
using test::raw_safetensors;

template <typename T>
std::string bytes_of_values(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::string f32(const std::vector<float>& v) { return bytes_of_values(v); }
std::string f16(const std::vector<float>& v) {
  std::vector<std::uint16_t> h;
  for (float x : v) h.push_back(float_to_half_bits(x));
  return bytes_of_values(h);
}
std::string bf16s(const std::vector<float>& v) {
  std::vector<std::uint16_t> h;
  for (float x : v) h.push_back(bf16(x).bits);
  return bytes_of_values(h);
}

class HfWeights : public test::TempDirTest {
 protected:
  std::string error_of(const std::string& dir) {
    try {
      HfWeightFiles w(dir);
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  }
};

TEST_F(HfWeights, ReadsOneFileOfMixedTypesAsFp32) {
  // Values exact in every type, so the conversions must give them back bit for bit.
  const std::vector<float> a = {1.0f, -2.5f, 0.375f, 1024.0f, -0.0f, 3.0f};
  put(path("model.safetensors"),
      raw_safetensors({{"a", "F16", {2, 3}, f16(a)}, {"b", "BF16", {6}, bf16s(a)}, {"c", "F32", {3, 2}, f32(a)}}));
  const HfWeightFiles w(dir_.string());
  EXPECT_EQ(w.tensor_names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(w.entry("a").dtype, StoredType::f16);
  EXPECT_EQ(w.entry("b").dtype, StoredType::bf16);
  EXPECT_EQ(w.entry("a").shape, (std::vector<std::int64_t>{2, 3}));
  for (const char* name : {"a", "b", "c"}) {
    std::vector<float> out(6);
    w.read(name, out);
    EXPECT_EQ(0, std::memcmp(out.data(), a.data(), sizeof(float) * 6)) << name;
  }
  EXPECT_EQ(w.file_count(), 1u);
}

TEST_F(HfWeights, ConvertsRoundedValuesExactly) {
  // Arbitrary values: what the file holds is the rounded value; reading gives that, exactly.
  std::vector<float> v;
  for (int i = 0; i < 1000; ++i) v.push_back(std::sin(static_cast<float>(i)) * 3.0f);
  put(path("model.safetensors"), raw_safetensors({{"h", "F16", {1000}, f16(v)}, {"b", "BF16", {1000}, bf16s(v)}}));
  const HfWeightFiles w(dir_.string());
  std::vector<float> h(1000), b(1000);
  w.read("h", h);
  w.read("b", b);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(h[i], half_bits_to_float(float_to_half_bits(v[i])));
    EXPECT_EQ(b[i], round_to_bf16(v[i]));
  }
}

TEST_F(HfWeights, ReadsShardsThroughTheIndex) {
  put(path("model-00001-of-00002.safetensors"), raw_safetensors({{"x", "F32", {2}, f32({1, 2})}}));
  put(path("model-00002-of-00002.safetensors"),
      raw_safetensors({{"y", "BF16", {1}, bf16s({3})}, {"z", "F16", {1}, f16({4})}}));
  put(path("model.safetensors.index.json"),
      R"({"metadata": {"total_size": 12}, "weight_map": {"x": "model-00001-of-00002.safetensors",
          "y": "model-00002-of-00002.safetensors", "z": "model-00002-of-00002.safetensors"}})");
  const HfWeightFiles w(dir_.string());
  EXPECT_EQ(w.file_count(), 2u);
  EXPECT_EQ(w.tensor_names(), (std::vector<std::string>{"x", "y", "z"}));
  std::vector<float> one(1);
  w.read("z", one);
  EXPECT_EQ(one[0], 4.0f);
  EXPECT_NE(w.file_of("y").find("model-00002-of-00002.safetensors"), std::string::npos);
}

TEST_F(HfWeights, RefusesIndexesThatDisagreeWithTheirFiles) {
  put(path("a.safetensors"), raw_safetensors({{"x", "F32", {1}, f32({1})}, {"y", "F32", {1}, f32({2})}}));
  put(path("model.safetensors.index.json"), R"({"weight_map": {"x": "a.safetensors"}})");
  EXPECT_NE(error_of(dir_.string()).find("a.safetensors: tensor \"y\": not listed in model.safetensors.index.json"),
            std::string::npos)
      << error_of(dir_.string());
  put(path("model.safetensors.index.json"), R"({"weight_map": {"x": "a.safetensors", "y": "a.safetensors", "w": "a.safetensors"}})");
  EXPECT_NE(error_of(dir_.string()).find("weight_map.w: the tensor is not in a.safetensors"), std::string::npos)
      << error_of(dir_.string());
  put(path("model.safetensors.index.json"), R"({"weight_map": {"x": "../a.safetensors"}})");
  EXPECT_NE(error_of(dir_.string()).find("weight_map.x: expected a plain file name"), std::string::npos);
  put(path("model.safetensors.index.json"), R"({"weight_map": {"x": "a.safetensors", "y": "a.safetensors"}, "shards": 1})");
  EXPECT_NE(error_of(dir_.string()).find("model.safetensors.index.json: shards: unknown field"), std::string::npos);
  put(path("model.safetensors.index.json"), R"({"weight_map": {"x": "missing.safetensors"}})");
  EXPECT_NE(error_of(dir_.string()).find("missing.safetensors: (file): cannot open"), std::string::npos)
      << error_of(dir_.string());
}

TEST_F(HfWeights, SaysWhatItReadsWhenThereIsNoSafetensorsFile) {
  put(path("pytorch_model.bin"), "PK");
  EXPECT_NE(error_of(dir_.string()).find("neither model.safetensors nor model.safetensors.index.json is here"),
            std::string::npos);
  EXPECT_NE(error_of(path("nope")).find("does not exist"), std::string::npos);
}

TEST_F(HfWeights, RefusesOtherDtypesNamingTheTensor) {
  put(path("model.safetensors"), raw_safetensors({{"ids", "I64", {1}, std::string(8, '\0')}}));
  EXPECT_NE(error_of(dir_.string()).find("tensor \"ids\" dtype: expected \"F32\", \"F16\" or \"BF16\""),
            std::string::npos)
      << error_of(dir_.string());
}

TEST_F(HfWeights, PlaitCheckpointsStayFp32Only) {
  put(path("c.safetensors"), raw_safetensors({{"x", "BF16", {1}, bf16s({1})}}));
  try {
    SafetensorsReader r(path("c.safetensors"));
    FAIL() << "a BF16 tensor was accepted by the checkpoint reader";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("expected \"F32\" (plait stores fp32 tensors)"), std::string::npos);
  }
}

TEST_F(HfWeights, WritesNarrowTypesThatReadBackRounded) {
  std::vector<float> v = {1.0f / 3, -7.123f, 1e-6f, 300.7f};
  const std::vector<TensorRef> tensors = {{"h", {4}, v, StoredType::f16}, {"b", {2, 2}, v, StoredType::bf16}};
  const WrittenFile written = write_safetensors(path("model.safetensors"), tensors, {{"format", "pt"}});
  EXPECT_EQ(written.bytes % 8, 0u);  // header padded; 16 bytes of data
  const HfWeightFiles w(dir_.string());
  std::vector<float> h(4), b(4);
  w.read("h", h);
  w.read("b", b);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(h[i], half_bits_to_float(float_to_half_bits(v[i])));
    EXPECT_EQ(b[i], round_to_bf16(v[i]));
  }
  // The streamed writer produces the same bytes as the one from memory.
  const Directory d = Directory::open(dir_.string());
  const std::vector<TensorLayout> layout = {{"h", {4}, StoredType::f16}, {"b", {2, 2}, StoredType::bf16}};
  write_safetensors(d, "streamed.safetensors", layout,
                    [&](std::size_t, std::span<float> out) { std::copy(v.begin(), v.end(), out.begin()); },
                    {{"format", "pt"}});
  EXPECT_EQ(bytes_of(path("streamed.safetensors")), bytes_of(path("model.safetensors")));
}

}  // namespace
}  // namespace plait::checkpoint
