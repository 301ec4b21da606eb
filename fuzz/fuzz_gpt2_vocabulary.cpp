// Fuzzes GPT-2 vocabulary loading: the input is encoder.json, a NUL byte, then vocab.bpe. A
// vocabulary that loads must then encode text (the input's bytes) and decode it back exactly.
#include <cstdint>
#include <string_view>

#include "plait/core/error.h"
#include "plait/data/gpt2_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = all.find('\0');
  const std::string_view encoder = all.substr(0, nul);
  const std::string_view merges = nul == std::string_view::npos ? "" : all.substr(nul + 1);
  try {
    plait::data::Gpt2Tokenizer tok =
        plait::data::Gpt2Tokenizer::parse(encoder, merges, "encoder.json", "vocab.bpe");
    const auto ids = tok.encode(all);
    if (tok.decode(ids) != all) __builtin_trap();
  } catch (const plait::Error&) {
  }
  return 0;
}
