#pragma once
// The three Unicode classes GPT-2's pre-tokenisation pattern uses: letters (general category
// L: Lu Ll Lt Lm Lo), numbers (N: Nd Nl No) and white space (the White_Space property, which
// is what \s means in OpenAI's pattern under the `regex` module and in tiktoken). The tables
// cover all of Unicode (Latin, Greek, Cyrillic, CJK, Devanagari, ...) as sorted code point
// ranges generated from ICU's data by unicode_categories.gen.mjs; lookups are binary searches.
//
// Why a table and not ICU: these are the only three properties needed; a 7 KB table keeps the
// tokenizer free of a 30 MB library and its version-dependent behaviour, and the generator
// records which Unicode version the table is (unicode_version()).
#include <cstddef>
#include <cstdint>

namespace plait::data {

bool is_unicode_letter(char32_t cp);
bool is_unicode_number(char32_t cp);
bool is_unicode_white_space(char32_t cp);
const char* unicode_version();

namespace unicode_tables {
struct CodePointRange {
  std::uint32_t first;
  std::uint32_t last;  // inclusive
};
extern const CodePointRange kLetters[];
extern const std::size_t kLettersCount;
extern const CodePointRange kNumbers[];
extern const std::size_t kNumbersCount;
extern const CodePointRange kWhiteSpace[];
extern const std::size_t kWhiteSpaceCount;
extern const char kUnicodeVersion[];
}  // namespace unicode_tables

}  // namespace plait::data
