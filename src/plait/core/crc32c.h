#pragma once
// CRC-32C (Castagnoli polynomial 0x1EDC6F41, reflected 0x82F63B78; RFC 3720 appendix B.4), the
// checksum of each checkpoint file in its manifest and of each token shard in its manifest.
// Table-driven, eight bytes at a time
// ("slicing-by-8", Kounavis and Berry 2005). crc32c(b, crc32c(a)) == crc32c(a + b).
#include <cstddef>
#include <cstdint>
#include <span>

namespace plait {

std::uint32_t crc32c(std::span<const std::byte> bytes, std::uint32_t crc = 0);

}  // namespace plait
