#include "plait/core/crc32c.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace plait {
namespace {

std::uint32_t crc_of(const std::vector<std::uint8_t>& v) {
  return crc32c(std::as_bytes(std::span(v.data(), v.size())));
}

TEST(Crc32c, MatchesRfc3720TestVectors) {
  // RFC 3720 appendix B.4 and the common "123456789" check value.
  EXPECT_EQ(crc_of(std::vector<std::uint8_t>(32, 0x00)), 0x8A9136AAu);
  EXPECT_EQ(crc_of(std::vector<std::uint8_t>(32, 0xFF)), 0x62A8AB43u);
  std::vector<std::uint8_t> inc(32), dec(32);
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<std::uint8_t>(i), dec[i] = static_cast<std::uint8_t>(31 - i);
  EXPECT_EQ(crc_of(inc), 0x46DD794Eu);
  EXPECT_EQ(crc_of(dec), 0x113FDB5Cu);
  const std::string check = "123456789";
  EXPECT_EQ(crc32c(std::as_bytes(std::span(check.data(), check.size()))), 0xE3069283u);
}

TEST(Crc32c, ExtendsAcrossChunksOfAnyLength) {
  std::vector<std::uint8_t> data(1000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 37 + 11);
  const auto bytes = std::as_bytes(std::span(data.data(), data.size()));
  const std::uint32_t whole = crc32c(bytes);
  for (std::size_t cut : {0u, 1u, 7u, 8u, 9u, 500u, 999u, 1000u}) {
    EXPECT_EQ(crc32c(bytes.subspan(cut), crc32c(bytes.first(cut))), whole) << cut;
  }
}

// The manifests' text form: exactly "0x" and 8 lower-case digits, read back as written.
TEST(Crc32c, TextFormRoundTripsAndIsStrict) {
  EXPECT_EQ(crc32c_text(0x1a2b3c4du), "0x1a2b3c4d");
  EXPECT_EQ(crc32c_text(0), "0x00000000");
  std::uint32_t crc = 0;
  ASSERT_TRUE(parse_crc32c_text("0xe3069283", crc));
  EXPECT_EQ(crc, 0xE3069283u);
  for (const char* bad : {"0xE3069283", "e3069283", "0x3069283", "0x0e3069283", "0xe306928g", ""}) {
    EXPECT_FALSE(parse_crc32c_text(bad, crc)) << bad;
  }
}

}  // namespace
}  // namespace plait
