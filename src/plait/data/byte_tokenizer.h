#pragma once
// Byte-level tokenizer: each byte of UTF-8 text is one token (vocabulary 256).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace plait::data {

struct ByteTokenizer {
  static constexpr int kVocabSize = 256;

  static std::vector<std::uint16_t> encode(std::string_view text) {
    std::vector<std::uint16_t> tokens(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
      tokens[i] = static_cast<unsigned char>(text[i]);
    }
    return tokens;
  }

  static std::string decode(const std::vector<std::uint16_t>& tokens) {
    std::string text(tokens.size(), '\0');
    for (std::size_t i = 0; i < tokens.size(); ++i) text[i] = static_cast<char>(tokens[i] & 0xFF);
    return text;
  }
};

}  // namespace plait::data
