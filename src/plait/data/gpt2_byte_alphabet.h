#pragma once
// GPT-2's reversible map between the 256 byte values and 256 printable Unicode characters
// (OpenAI gpt-2, src/encoder.py, bytes_to_unicode): bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF
// stand for themselves; the other 68 bytes (controls, space, 0x7F..0xA0, 0xAD) take U+0100,
// U+0101, ... in byte order. encoder.json and vocab.bpe spell every token in these characters,
// so a space is 'Ġ' (U+0120) and a newline 'Ċ' (U+010A).
#include <cstdint>
#include <string>

namespace plait::data {

char32_t gpt2_byte_to_char(std::uint8_t byte);
// The byte a character stands for, or -1 if it is not one of the 256.
int gpt2_char_to_byte(char32_t c);

}  // namespace plait::data
