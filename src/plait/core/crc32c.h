#pragma once
// CRC-32C (Castagnoli polynomial 0x1EDC6F41, reflected 0x82F63B78; RFC 3720 appendix B.4), the
// checksum of each checkpoint file in its manifest and of each token shard in its manifest.
// Table-driven, eight bytes at a time
// ("slicing-by-8", Kounavis and Berry 2005). crc32c(b, crc32c(a)) == crc32c(a + b).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace plait {

std::uint32_t crc32c(std::span<const std::byte> bytes, std::uint32_t crc = 0);

// The form manifests write a checksum in: "0x" and 8 lower-case hex digits ("0x1a2b3c4d").
std::string crc32c_text(std::uint32_t crc);
// Reads crc32c_text's form back; false for anything else (upper case, other lengths).
bool parse_crc32c_text(std::string_view text, std::uint32_t& crc);

}  // namespace plait
