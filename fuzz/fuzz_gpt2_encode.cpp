// Fuzzes GPT-2 encoding (pre-tokenisation over Unicode classes, invalid UTF-8, BPE merging) with
// a fixed vocabulary of the 256 bytes plus common English merges (or GPT-2's own, if
// PLAIT_GPT2_DIR names it). Invariants: decode(encode(x)) == x for any bytes, and streaming in
// chunks (sizes taken from the input's first byte) gives exactly the tokens of the whole.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "plait/data/gpt2_byte_alphabet.h"
#include "plait/data/gpt2_tokenizer.h"

namespace {

std::string spell(std::string_view bytes) {
  std::string s;
  for (unsigned char b : bytes) {
    const char32_t c = plait::data::gpt2_byte_to_char(b);
    if (c < 0x80) {
      s += static_cast<char>(c);
    } else {
      s += static_cast<char>(0xC0 | (c >> 6));
      s += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return s;
}

plait::data::Gpt2Tokenizer make_tokenizer() {
  // With PLAIT_GPT2_DIR set (scripts/fetch-gpt2-tokenizer.sh), fuzz with the real 50,000 merges.
  if (const char* dir = std::getenv("PLAIT_GPT2_DIR")) return plait::data::Gpt2Tokenizer::load(dir);
  const std::vector<std::pair<std::string, std::string>> merges = {
      {" ", "t"}, {"h", "e"}, {" t", "he"}, {"i", "n"}, {" ", "a"}, {"e", "r"}, {"o", "n"},
      {"\n", "\n"}, {" ", " "}, {"  ", "  "}, {"'", "s"}, {"in", "g"}, {" a", "n"}, {" an", "d"},
      {"\xC3", "\xA9"}, {"e", "s"}, {"r", "e"}, {"1", "2"}, {"12", "3"}, {".", "."}};
  nlohmann::json enc = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) enc[spell(std::string(1, static_cast<char>(b)))] = b;
  std::string bpe = "#version: 0.2\n";
  int next = 256;
  for (const auto& [l, r] : merges) {
    if (!enc.contains(spell(l + r))) enc[spell(l + r)] = next++;
    bpe += spell(l) + " " + spell(r) + "\n";
  }
  return plait::data::Gpt2Tokenizer::parse(enc.dump(), bpe, "encoder.json", "vocab.bpe");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static plait::data::Gpt2Tokenizer tok = make_tokenizer();
  if (size == 0) return 0;
  const std::size_t chunk = 1 + data[0] % 13;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::vector<std::uint16_t> whole = tok.encode(text);
  if (tok.decode(whole) != text) __builtin_trap();
  std::vector<std::uint16_t> streamed;
  std::string carry;
  for (std::size_t pos = 0; pos < text.size(); pos += chunk) {
    carry.append(text.substr(pos, chunk));
    carry.erase(0, tok.encode_prefix(carry, false, streamed));
  }
  tok.encode_prefix(carry, true, streamed);
  if (streamed != whole) __builtin_trap();
  return 0;
}
