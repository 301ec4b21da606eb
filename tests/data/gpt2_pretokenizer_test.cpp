#include "plait/data/gpt2_pretokenizer.h"

#include <gtest/gtest.h>

#include "plait/data/unicode_categories.h"

namespace plait::data {
namespace {

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string_view> views;
  EXPECT_EQ(split_gpt2_pieces(text, true, views), text.size());
  return {views.begin(), views.end()};
}

using P = std::vector<std::string>;

TEST(Gpt2Pretokenizer, FollowsThePatternAlternativesInOrder) {
  EXPECT_EQ(pieces("Hello world"), (P{"Hello", " world"}));
  EXPECT_EQ(pieces("don't DON'T they'll"), (P{"don", "'t", " DON", "'", "T", " they", "'ll"}));
  EXPECT_EQ(pieces("a 's"), (P{"a", " '", "s"}));
  EXPECT_EQ(pieces("x2024 3.14"), (P{"x", "2024", " 3", ".", "14"}));
  EXPECT_EQ(pieces("?!'s"), (P{"?!'", "s"}));
  // \s+(?!\S) leaves the last space of a run to the next word; a lone newline stays alone.
  EXPECT_EQ(pieces("a   b"), (P{"a", "  ", " b"}));
  EXPECT_EQ(pieces("a\n\n\nb"), (P{"a", "\n\n", "\n", "b"}));
  EXPECT_EQ(pieces("a\nb"), (P{"a", "\n", "b"}));
  EXPECT_EQ(pieces("end  "), (P{"end", "  "}));
  EXPECT_EQ(pieces(" \t!"), (P{" ", "\t", "!"}));
  EXPECT_EQ(pieces(""), P{});
}

TEST(Gpt2Pretokenizer, UsesUnicodeLettersNumbersAndSpaces) {
  // Greek, Cyrillic and CJK are letters; ½ and Arabic-Indic three are numbers; U+3000 is white
  // space; the Devanagari vowel sign U+093F (a mark, Mc) is none of these.
  EXPECT_EQ(pieces("\xCE\xB1\xCE\xB2 \xD0\xB6 \xE4\xB8\xAD\xE6\x96\x87"),
            (P{"\xCE\xB1\xCE\xB2", " \xD0\xB6", " \xE4\xB8\xAD\xE6\x96\x87"}));
  EXPECT_EQ(pieces("\xC2\xBD\xD9\xA3x"), (P{"\xC2\xBD\xD9\xA3", "x"}));
  EXPECT_EQ(pieces("a\xE3\x80\x80\xE3\x80\x80" "b"), (P{"a", "\xE3\x80\x80", "\xE3\x80\x80", "b"}));
  EXPECT_EQ(pieces("\xE0\xA4\xA8\xE0\xA4\xBF"), (P{"\xE0\xA4\xA8", "\xE0\xA4\xBF"}));
  // Bytes that are not UTF-8 are "other" characters, one byte each.
  EXPECT_EQ(pieces("ab\xFF\xFE cd"), (P{"ab", "\xFF\xFE", " cd"}));
}

TEST(UnicodeCategories, ClassifiesAcrossScripts) {
  EXPECT_TRUE(is_unicode_letter(U'a'));
  EXPECT_TRUE(is_unicode_letter(U'\u00E9'));   // é
  EXPECT_TRUE(is_unicode_letter(U'\u03A9'));   // Ω
  EXPECT_TRUE(is_unicode_letter(U'\u0416'));   // Ж
  EXPECT_TRUE(is_unicode_letter(U'\u4E2D'));   // 中
  EXPECT_TRUE(is_unicode_letter(U'\u3042'));   // あ
  EXPECT_TRUE(is_unicode_letter(U'\U00020000'));  // CJK extension B
  EXPECT_FALSE(is_unicode_letter(U'\u093F'));  // Devanagari vowel sign I (Mc)
  EXPECT_FALSE(is_unicode_letter(U'1'));
  EXPECT_FALSE(is_unicode_letter(U'\U0001F44D'));  // 👍
  EXPECT_TRUE(is_unicode_number(U'7'));
  EXPECT_TRUE(is_unicode_number(U'\u00BD'));   // ½ (No)
  EXPECT_TRUE(is_unicode_number(U'\u216B'));   // Ⅻ (Nl)
  EXPECT_TRUE(is_unicode_number(U'\u0663'));   // Arabic-Indic three (Nd)
  EXPECT_FALSE(is_unicode_number(U'x'));
  EXPECT_TRUE(is_unicode_white_space(U'\u3000'));
  EXPECT_TRUE(is_unicode_white_space(U'\u0085'));
  EXPECT_FALSE(is_unicode_white_space(U'\uFEFF'));  // BOM: not White_Space
  EXPECT_FALSE(is_unicode_white_space(U'\u200B'));  // zero width space: not White_Space
}

}  // namespace
}  // namespace plait::data
