// Fuzzes llm.c token shard validation: parse_shard_header on the raw bytes, then the full reader
// (TokenShard: fstat, pread, mmap, token range check, the manifest's checksum) on the same bytes
// as a file. Anything but a
// plait::Error is a finding; a shard that opens must hold exactly the count its size implies.
#include <cstdint>
#include <span>

#include "fuzz_input_file.h"
#include "plait/core/crc32c.h"
#include "plait/core/error.h"
#include "plait/data/token_shard.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static plait::fuzz::InputFile file;
  const auto bytes = std::as_bytes(std::span(data, size));
  try {
    const std::int64_t count = plait::data::parse_shard_header(bytes, size, "fuzz.bin");
    if (1024 + 2 * static_cast<std::uint64_t>(count) != size) __builtin_trap();
  } catch (const plait::Error&) {
  }
  try {
    plait::data::TokenShard shard(file.write(data, size), 50257);
    std::uint64_t sum = 0;
    for (std::uint16_t t : shard.tokens()) {
      if (t >= 50257) __builtin_trap();
      sum += t;
    }
    if (shard.tokens().size() * 2 + 1024 != size) __builtin_trap();
    (void)sum;
  } catch (const plait::Error&) {
  }
  // With the manifest's checksum: the file's own CRC-32C passes (if the shard is valid at all),
  // any other is refused.
  const std::uint32_t crc = plait::crc32c(bytes);
  bool valid = false;
  try {
    plait::data::TokenShard shard(file.write(data, size), std::nullopt, plait::data::ShardChecksum{crc, "m.json"});
    valid = true;
  } catch (const plait::Error&) {
  }
  try {
    plait::data::TokenShard shard(file.write(data, size), std::nullopt, plait::data::ShardChecksum{crc ^ 1u, "m.json"});
    __builtin_trap();  // a wrong checksum must never pass
  } catch (const plait::Error&) {
  }
  (void)valid;
  return 0;
}
