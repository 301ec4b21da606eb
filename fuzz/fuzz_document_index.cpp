// Fuzzes the document boundary index parser (<shard>.docs, data/document_index.h): anything but a
// plait::Error is a finding; an index it accepts has strictly increasing starts below its token
// count and writes back to the very same bytes (what plait data prepare writes, the loader
// reads back).
#include <cstdint>
#include <cstring>
#include <span>

#include "plait/core/error.h"
#include "plait/data/document_index.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace plait::data;
  const auto bytes = std::as_bytes(std::span(data, size));
  try {
    const DocumentIndex index = parse_document_index(bytes, "corpus_train_000000.docs");
    for (std::size_t i = 0; i < index.starts.size(); ++i) {
      if (index.starts[i] >= index.shard_tokens || (i > 0 && index.starts[i] <= index.starts[i - 1])) __builtin_trap();
    }
    const std::vector<std::byte> again = document_index_bytes(index);
    if (again.size() != size || std::memcmp(again.data(), data, size) != 0) __builtin_trap();
  } catch (const plait::Error&) {
  }
  return 0;
}
