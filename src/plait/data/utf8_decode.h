#pragma once
// Strict UTF-8 decoding of one character (RFC 3629 section 4): overlong forms, surrogates and
// code points above U+10FFFF are invalid. An invalid or truncated sequence decodes as a single
// byte that is not a character, so text with stray bytes still splits and round-trips byte for
// byte instead of being rejected or altered.
#include <cstddef>
#include <string>
#include <string_view>

namespace plait::data {

struct Utf8Char {
  char32_t code_point;  // kNotACharacter for an invalid byte
  int length;           // bytes used, 1..4
  static constexpr char32_t kNotACharacter = 0xFFFFFFFF;
};

// Decodes the character starting at text[pos]; pos < text.size().
Utf8Char decode_utf8(std::string_view text, std::size_t pos);

// The UTF-8 bytes of a code point (at most U+10FFFF).
std::string encode_utf8(char32_t c);

}  // namespace plait::data
