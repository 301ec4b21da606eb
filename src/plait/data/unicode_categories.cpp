#include "plait/data/unicode_categories.h"

#include <algorithm>

namespace plait::data {
namespace {

using unicode_tables::CodePointRange;

bool in_ranges(const CodePointRange* ranges, std::size_t count, char32_t cp) {
  // The first range whose last code point is >= cp is the only one that can hold cp.
  const CodePointRange* end = ranges + count;
  const CodePointRange* it = std::lower_bound(
      ranges, end, static_cast<std::uint32_t>(cp),
      [](const CodePointRange& r, std::uint32_t v) { return r.last < v; });
  return it != end && it->first <= cp;
}

}  // namespace

bool is_unicode_letter(char32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return in_ranges(unicode_tables::kLetters, unicode_tables::kLettersCount, cp);
}

bool is_unicode_number(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return in_ranges(unicode_tables::kNumbers, unicode_tables::kNumbersCount, cp);
}

bool is_unicode_white_space(char32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  return in_ranges(unicode_tables::kWhiteSpace, unicode_tables::kWhiteSpaceCount, cp);
}

const char* unicode_version() { return unicode_tables::kUnicodeVersion; }

}  // namespace plait::data
