#pragma once
// Little-endian int32 fields of plait's and llm.c's binary headers (token_shard.h,
// document_index.h), read and written byte by byte so the files mean the same on any host.
#include <cstddef>
#include <cstdint>
#include <span>

namespace plait::data {

inline std::uint32_t read_le_uint32(std::span<const std::byte> bytes, std::size_t offset) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(bytes[offset + i]);
  return v;
}

inline std::int32_t read_le_int32(std::span<const std::byte> bytes, std::size_t offset) {
  return static_cast<std::int32_t>(read_le_uint32(bytes, offset));
}

inline void write_le_uint32(std::span<std::byte> bytes, std::size_t offset, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) bytes[offset + i] = static_cast<std::byte>((value >> (8 * i)) & 0xFF);
}

inline void write_le_int32(std::span<std::byte> bytes, std::size_t offset, std::int32_t value) {
  write_le_uint32(bytes, offset, static_cast<std::uint32_t>(value));
}

}  // namespace plait::data
