#pragma once
// GPT-2's pre-tokenisation: text is cut into pieces by the pattern of OpenAI gpt-2
// (src/encoder.py)
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// and BPE then runs inside each piece. Written out by hand: at each position the first
// alternative that matches wins, each + is greedy, and \s+(?!\S) backtracks one character so a
// run of white space before a word leaves its last space to that word (" world").
// Letters, numbers and white space are Unicode classes (unicode_categories.h). A byte that is
// not part of valid UTF-8 counts as neither letter, number nor space.
#include <cstddef>
#include <string_view>
#include <vector>

namespace plait::data {

// Appends the pieces of `text` to `pieces` (views into text) and returns how many bytes of
// text they cover. With at_end, that is all of text. Without it, text is a prefix of a longer
// stream: pieces stop before the first one that more text could change (a piece ending within
// 8 bytes of the end: the pattern looks at most one character, up to 4 bytes, past a
// piece, plus the 3 bytes of "'ll"), so splitting a stream anywhere and carrying the
// unconsumed rest into the next call gives exactly the pieces of the whole.
std::size_t split_gpt2_pieces(std::string_view text, bool at_end,
                              std::vector<std::string_view>& pieces);

// Pieces longer than a block of the stream (one 50 MB word) are followed run by run instead
// of being cut again from their start on every call: every piece that is not a contraction is
// a run of one class (after an optional space) or a white-space run.
enum class Gpt2Run { kLetters, kNumbers, kOther, kSpace };

// The run of the piece starting at text[p] (not a contraction; p < text.size()): kSpace for a
// white-space piece, else the class of the run after its optional leading space.
Gpt2Run gpt2_piece_run(std::string_view text, std::size_t p);

// Continues a piece of run `run` whose bytes so far precede `text` (at least two characters of
// it, for kSpace). Returns {end, finished}: finished, the piece ends at text[end] (a white-space
// piece leaves its last character to the next piece when a non-space follows, as
// \s+(?!\S) does); not finished, text[0, end) belongs to the piece and the rest (under 8 bytes:
// split_gpt2_pieces' look-ahead; for kSpace from its last white-space character on) must be
// carried into the next call. With at_end the piece always finishes.
struct Gpt2RunEnd {
  std::size_t end = 0;
  bool finished = false;
};
Gpt2RunEnd continue_gpt2_run(Gpt2Run run, std::string_view text, bool at_end);

}  // namespace plait::data
