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

}  // namespace plait::data
