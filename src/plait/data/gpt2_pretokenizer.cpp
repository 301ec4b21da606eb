#include "plait/data/gpt2_pretokenizer.h"

#include "plait/data/unicode_categories.h"
#include "plait/data/utf8_decode.h"

namespace plait::data {
namespace {

enum class CharClass { kLetter, kNumber, kSpace, kOther };

// Why 8: a piece [p, e) depends on text up to the character after e (<= 4 bytes) and, for the
// white-space rule, on the character after a run that can reach 3 bytes past e.
constexpr std::size_t kLookahead = 8;

CharClass classify(char32_t cp) {
  if (cp == Utf8Char::kNotACharacter) return CharClass::kOther;
  if (is_unicode_letter(cp)) return CharClass::kLetter;
  if (is_unicode_number(cp)) return CharClass::kNumber;
  if (is_unicode_white_space(cp)) return CharClass::kSpace;
  return CharClass::kOther;
}

// Length of the contraction ('s 't 're 've 'm 'll 'd) at text[p], or 0.
std::size_t contraction_at(std::string_view text, std::size_t p) {
  if (text[p] != '\'' || p + 1 >= text.size()) return 0;
  const char c1 = text[p + 1];
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (p + 2 >= text.size()) return 0;
  const char c2 = text[p + 2];
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  return 0;
}

// End of the run of characters of class `cls` starting at q.
std::size_t run_end(std::string_view text, std::size_t q, CharClass cls) {
  while (q < text.size()) {
    const Utf8Char c = decode_utf8(text, q);
    if (classify(c.code_point) != cls) break;
    q += c.length;
  }
  return q;
}

// End of the piece that starts at p < text.size().
std::size_t piece_end(std::string_view text, std::size_t p) {
  if (const std::size_t n = contraction_at(text, p)) return p + n;
  // " ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+": the three classes are disjoint, so the class of
  // the character after the optional space picks the alternative.
  const std::size_t q = text[p] == ' ' ? p + 1 : p;
  if (q < text.size()) {
    const CharClass cls = classify(decode_utf8(text, q).code_point);
    if (cls != CharClass::kSpace) return run_end(text, q, cls);
  }
  // "\s+(?!\S)|\s+": the white-space run, less its last character when a non-space follows
  // and the run has more than one character.
  std::size_t last = p;
  std::size_t q2 = p;
  while (q2 < text.size()) {
    const Utf8Char c = decode_utf8(text, q2);
    if (classify(c.code_point) != CharClass::kSpace) break;
    last = q2;
    q2 += c.length;
  }
  if (q2 < text.size() && last > p) return last;
  return q2;
}

CharClass class_of(Gpt2Run run) {
  switch (run) {
    case Gpt2Run::kLetters: return CharClass::kLetter;
    case Gpt2Run::kNumbers: return CharClass::kNumber;
    case Gpt2Run::kOther: return CharClass::kOther;
    case Gpt2Run::kSpace: break;
  }
  return CharClass::kSpace;
}

}  // namespace

Gpt2Run gpt2_piece_run(std::string_view text, std::size_t p) {
  const std::size_t q = text[p] == ' ' ? p + 1 : p;
  const CharClass cls = q < text.size() ? classify(decode_utf8(text, q).code_point) : CharClass::kSpace;
  switch (cls) {
    case CharClass::kLetter: return Gpt2Run::kLetters;
    case CharClass::kNumber: return Gpt2Run::kNumbers;
    case CharClass::kOther: return Gpt2Run::kOther;
    case CharClass::kSpace: break;
  }
  return Gpt2Run::kSpace;
}

Gpt2RunEnd continue_gpt2_run(Gpt2Run run, std::string_view text, bool at_end) {
  const CharClass cls = class_of(run);
  std::size_t q = 0, last = 0;  // last: where the run's last character so far starts
  while (q < text.size()) {
    // Never decide on a character the next block could complete (split_gpt2_pieces' rule).
    if (!at_end && q + kLookahead > text.size()) break;
    const Utf8Char c = decode_utf8(text, q);
    if (classify(c.code_point) != cls) {
      // A white-space run followed by a non-space leaves its last character to the next piece
      // (the run is at least two characters: this one's caller holds the first).
      return {cls == CharClass::kSpace ? last : q, true};
    }
    last = q;
    q += c.length;
  }
  if (at_end) return {text.size(), true};
  // Unfinished: a white-space run keeps its last character back, to give it away if a
  // non-space follows.
  return {cls == CharClass::kSpace ? last : q, false};
}

std::size_t split_gpt2_pieces(std::string_view text, bool at_end,
                              std::vector<std::string_view>& pieces) {
  std::size_t p = 0;
  while (p < text.size()) {
    const std::size_t e = piece_end(text, p);
    if (!at_end && e + kLookahead > text.size()) break;
    pieces.push_back(text.substr(p, e - p));
    p = e;
  }
  return p;
}

}  // namespace plait::data
