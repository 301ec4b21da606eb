// Fuzzes the document-lengths file reader (<name>.lengths.json, data/document_length_file.h):
// anything but a plait::Error is a finding, and a histogram it accepts must hold what the reader
// promises: non-empty bins in increasing order, each within one length_bin, counts and tokens
// that add up to the file's totals, and no document longer than `longest`.
#include <cstdint>

#include "fuzz_input_file.h"
#include "plait/core/error.h"
#include "plait/data/document_length_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static plait::fuzz::InputFile file;
  try {
    const plait::data::LengthHistogram h = plait::data::read_document_lengths(file.write(data, size));
    std::int64_t documents = 0, tokens = 0, previous_hi = -1;
    for (const plait::data::LengthBin& b : h.bins) {
      if (b.count <= 0 || b.lo > b.hi || b.lo <= previous_hi || b.lo > h.longest) __builtin_trap();
      if (b.tokens < b.count * b.lo || b.tokens > b.count * b.hi) __builtin_trap();
      previous_hi = b.hi;
      documents += b.count;
      tokens += b.tokens;
    }
    if (documents != h.documents || tokens != h.tokens) __builtin_trap();
  } catch (const plait::Error&) {
  }
  return 0;
}
