#include "plait/checkpoint/safetensors_file.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "plait/core/error.h"
#include "support/temp_dir.h"

namespace plait::checkpoint {
namespace {

class Safetensors : public test::TempDirTest {
 protected:
  std::string open_error(const std::string& file) {
    try {
      SafetensorsReader r(file);
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  }
  // A file with the given raw header JSON and buffer.
  std::string with_header(const std::string& json, std::size_t buffer_bytes) {
    std::string b(8, '\0');
    for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((json.size() >> (8 * i)) & 0xFF);
    b += json + std::string(buffer_bytes, '\0');
    put(path("x.safetensors"), b);
    return open_error(path("x.safetensors"));
  }
};

TEST_F(Safetensors, RoundTripsAndTheHeaderParsesAsPlainJsonNamingEveryTensor) {
  std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, -7.0f};
  std::vector<float> b = {42.0f};
  std::vector<float> c;  // an empty tensor is allowed
  const std::vector<TensorRef> tensors = {{"h.3.attn.c_attn.weight", {2, 3}, a},
                                          {"h.3.attn.c_attn.weight.adam_m", {1}, b},
                                          {"empty", {0, 4}, c}};
  const WrittenFile w = write_safetensors(path("s.safetensors"), tensors, {{"step", "7"}});
  const std::string bytes = bytes_of(path("s.safetensors"));
  EXPECT_EQ(w.bytes, bytes.size());

  // Independent parse: u64 little-endian length, JSON, buffer — as any safetensors reader does.
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint8_t>(bytes[i]);
  EXPECT_EQ((8 + n) % 8, 0u);  // buffer 8-byte aligned
  const nlohmann::json h = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(h["__metadata__"]["step"], "7");
  for (const TensorRef& t : tensors) {
    ASSERT_TRUE(h.contains(t.name)) << t.name;
    EXPECT_EQ(h[t.name]["dtype"], "F32");
    EXPECT_EQ(h[t.name]["shape"].get<std::vector<std::int64_t>>(), t.shape);
    const auto off = h[t.name]["data_offsets"].get<std::vector<std::uint64_t>>();
    ASSERT_EQ(off[1] - off[0], t.data.size() * 4);
    std::vector<float> raw(t.data.size());
    if (!raw.empty()) std::memcpy(raw.data(), bytes.data() + 8 + n + off[0], off[1] - off[0]);
    EXPECT_EQ(raw, std::vector<float>(t.data.begin(), t.data.end()));
  }
  EXPECT_EQ(h.size(), tensors.size() + 1);
  EXPECT_EQ(8 + n + 4 * (a.size() + b.size()), bytes.size());

  SafetensorsReader r(path("s.safetensors"));
  std::vector<float> back(6);
  r.read("h.3.attn.c_attn.weight", back);
  EXPECT_EQ(back, a);
  EXPECT_EQ(r.header().metadata.at("step"), "7");
  EXPECT_EQ(r.find("empty")->shape, (std::vector<std::int64_t>{0, 4}));
  EXPECT_EQ(r.find("nope"), nullptr);
  std::vector<float> wrong(5);
  EXPECT_THROW(r.read("h.3.attn.c_attn.weight", wrong), InputError);
}

TEST_F(Safetensors, WriterRejectsInconsistentTensors) {
  std::vector<float> a(5);
  EXPECT_THROW(write_safetensors(path("a"), std::vector<TensorRef>{{"x", {2, 3}, a}}), Error);
  EXPECT_THROW(write_safetensors(path("a"), std::vector<TensorRef>{{"x", {5}, a}, {"x", {5}, a}}), Error);
  EXPECT_THROW(write_safetensors(path("a"), std::vector<TensorRef>{{"__metadata__", {5}, a}}), Error);
  EXPECT_FALSE(std::filesystem::exists(path("a")));
}

TEST_F(Safetensors, ReaderRejectsCorruptFilesPrecisely) {
  const std::string f = path("x.safetensors");
  const std::string t = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ(with_header(t, 8), "(no error)");
  EXPECT_EQ(with_header(t, 12), f + ": (buffer): the tensors cover 8 bytes of the buffer, but it has 12 bytes (file of 74)");
  EXPECT_EQ(with_header(t, 4), f + ": (buffer): the tensors cover 8 bytes of the buffer, but it has 4 bytes (file of 66)");
  EXPECT_EQ(with_header(R"({"t":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 4),
            f + ": tensor \"t\" dtype: expected \"F32\" (plait stores fp32 tensors), found \"F16\"");
  EXPECT_EQ(with_header(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
            f + ": tensor \"t\" data_offsets: shape [3] of F32 needs 12 bytes, the offsets [0,8] span 8");
  EXPECT_EQ(with_header(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8),
            f + ": tensor \"t\" data_offsets: expected begin <= end, found [8,0]");
  EXPECT_EQ(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
            f + ": tensor \"b\" data_offsets: expected to begin at 8 (it overlaps the previous tensor), found 4");
  EXPECT_EQ(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
            f + ": tensor \"a\" data_offsets: expected to begin at 0 (a hole before it), found 4");
  EXPECT_EQ(with_header(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8),
            f + ": tensor \"t\": the name appears twice in the header");
  EXPECT_EQ(with_header(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
            f + ": tensor \"t\" shape: expected non-negative integer dimensions, found [-2]");
  EXPECT_EQ(with_header(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
            f + ": tensor \"t\" data_offsets: shape [4294967296,4294967296] of F32 needs too many bytes, the offsets [0,8] span 8");
  EXPECT_EQ(with_header(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", 8),
            f + ": tensor \"t\" x: unknown field (expected dtype, shape, data_offsets)");
  EXPECT_EQ(with_header(R"({"__metadata__":{"k":1}})", 0), f + ": __metadata__.k: expected a string, found 1");
  EXPECT_EQ(with_header(R"([1,2])", 0), f + ": offset 8 (header): expected the JSON header to begin with '{'");
  EXPECT_EQ(with_header(R"({"t":)", 0), f + ": offset 8 (header): malformed JSON at header byte 6");
  EXPECT_EQ(with_header(R"({"t":1e999})", 0),
            f + ": offset 8 (header): a number is beyond the range of a double (about 1.8e308 in magnitude)");
  put(f, std::string("\x10\0\0\0\0\0\0\0{}", 10));
  EXPECT_EQ(open_error(f), f + ": offset 0 (header length): the header claims 16 bytes; expected at most 2 (the file has 10 bytes)");
  put(f, "abc");
  EXPECT_EQ(open_error(f), f + ": offset 0 (header length): expected an 8-byte header length, but the file has 3 bytes");
  // Padding with spaces after the JSON is allowed.
  EXPECT_EQ(with_header(t + "      ", 8), "(no error)");
}

}  // namespace
}  // namespace plait::checkpoint
