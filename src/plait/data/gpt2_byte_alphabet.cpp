#include "plait/data/gpt2_byte_alphabet.h"

#include <array>

namespace plait::data {
namespace {

bool stands_for_itself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Alphabet {
  std::array<char32_t, 256> to_char{};
  Alphabet() {
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) to_char[b] = stands_for_itself(b) ? b : next++;
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

char32_t gpt2_byte_to_char(std::uint8_t byte) { return alphabet().to_char[byte]; }

int gpt2_char_to_byte(char32_t c) {
  if (c < 256) return stands_for_itself(static_cast<int>(c)) ? static_cast<int>(c) : -1;
  if (c >= 256 + 68) return -1;
  const char32_t rank = c - 256;  // the rank-th byte that does not stand for itself
  char32_t seen = 0;
  for (int b = 0; b < 256; ++b) {
    if (!stands_for_itself(b) && seen++ == rank) return b;
  }
  return -1;
}

}  // namespace plait::data
