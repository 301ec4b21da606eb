#include "plait/data/gpt2_tokenizer.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <limits>
#include <fstream>
#include <functional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/core/printable_text.h"
#include "plait/data/gpt2_byte_alphabet.h"
#include "plait/data/gpt2_pretokenizer.h"
#include "plait/data/utf8_decode.h"

namespace plait::data {
namespace {

constexpr std::size_t kMaxVocabulary = 65536;  // ids must fit llm.c's uint16 shards
constexpr std::size_t kMaxCachedPieceBytes = 64;
constexpr std::size_t kMaxCacheEntries = 1 << 18;
// How much of a bad line an error quotes: enough to find it, not a copy of the file (the
// vocabulary directory is the user's, and may be a link to anything).
constexpr std::size_t kQuotedChars = 24;

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InputError(path, "(file)",
                     "cannot open the file (scripts/fetch-gpt2-tokenizer.sh fetches it)");
  }
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A token spelled in GPT-2's byte alphabet -> its raw bytes; on failure `bad` is the first
// character outside the alphabet (0 for an empty token).
bool spelled_to_bytes(std::string_view spelled, std::string& bytes, char32_t& bad) {
  bytes.clear();
  for (std::size_t i = 0; i < spelled.size();) {
    const Utf8Char c = decode_utf8(spelled, i);
    const int b = c.code_point == Utf8Char::kNotACharacter ? -1 : gpt2_char_to_byte(c.code_point);
    if (b < 0) {
      bad = c.code_point;
      return false;
    }
    bytes.push_back(static_cast<char>(b));
    i += c.length;
  }
  if (bytes.empty()) {
    bad = 0;  // an empty token
    return false;
  }
  return true;
}

std::string describe_char(char32_t c) {
  if (c == Utf8Char::kNotACharacter) return "a byte that is not UTF-8";
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(c));
  return std::string(buf) + ", which is not one of GPT-2's 256 byte characters";
}

}  // namespace

Gpt2Tokenizer Gpt2Tokenizer::load(const std::string& dir) {
  const std::string encoder_path = dir + "/encoder.json";
  const std::string merges_path = dir + "/vocab.bpe";
  return parse(read_whole_file(encoder_path), read_whole_file(merges_path), encoder_path,
               merges_path);
}

Gpt2Tokenizer Gpt2Tokenizer::parse(std::string_view encoder_json, std::string_view merges,
                                   const std::string& encoder_name,
                                   const std::string& merges_name) {
  Gpt2Tokenizer tok;
  const nlohmann::json vocab = parse_json_text(encoder_json, encoder_name);
  if (!vocab.is_object() || vocab.empty()) {
    throw InputError(encoder_name, "(top level)",
                     "expected a non-empty object {\"token\": id, ...}, found " +
                         std::string(vocab.type_name()));
  }
  if (vocab.size() > kMaxVocabulary) {
    throw InputError(encoder_name, "(top level)",
                     "expected at most 65536 tokens (ids are stored as uint16), found " +
                         std::to_string(vocab.size()));
  }
  const std::size_t n = vocab.size();
  tok.token_bytes_.assign(n, std::string());
  std::vector<bool> seen(n, false);
  std::unordered_map<std::string, std::uint16_t> id_of;
  id_of.reserve(n);
  std::string bytes;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const std::string field = "key " + nlohmann::json(it.key()).dump();
    if (!it.value().is_number_integer()) {
      throw InputError(encoder_name, field,
                       "expected an integer id, found " + it.value().dump());
    }
    const auto id = it.value().get<std::int64_t>();
    if (id < 0 || static_cast<std::size_t>(id) >= n) {
      throw InputError(encoder_name, field,
                       "expected an id in [0, " + std::to_string(n - 1) + "] (ids are 0..n-1 for " +
                           std::to_string(n) + " tokens), found " + std::to_string(id));
    }
    if (seen[id]) {
      throw InputError(encoder_name, field, "id " + std::to_string(id) + " is used twice");
    }
    char32_t bad = 0;
    if (!spelled_to_bytes(it.key(), bytes, bad)) {
      throw InputError(encoder_name, field,
                       it.key().empty() ? "empty token" : "contains " + describe_char(bad));
    }
    seen[id] = true;
    tok.token_bytes_[id] = bytes;
    id_of.emplace(bytes, static_cast<std::uint16_t>(id));
  }
  for (int b = 0; b < 256; ++b) {
    auto it = id_of.find(std::string(1, static_cast<char>(b)));
    if (it == id_of.end()) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "byte 0x%02X (character U+%04X) has no token", b,
                    static_cast<unsigned>(gpt2_byte_to_char(static_cast<std::uint8_t>(b))));
      throw InputError(encoder_name, "(vocabulary)",
                       std::string(buf) + "; every byte needs one so any text can be encoded");
    }
    tok.byte_token_[b] = it->second;
  }
  if (auto it = id_of.find("<|endoftext|>"); it != id_of.end()) tok.end_of_text_ = it->second;
  tok.token_length_.resize(n);
  for (std::size_t id = 0; id < n; ++id) {
    // A symbol's length is how BPE finds its neighbour; a token longer than 65535 bytes would
    // not fit (no real vocabulary comes near).
    if (tok.token_bytes_[id].size() > 65535) {
      throw InputError(encoder_name, "id " + std::to_string(id), "a token of more than 65535 bytes");
    }
    tok.token_length_[id] = static_cast<std::uint16_t>(tok.token_bytes_[id].size());
  }

  // vocab.bpe: "#version: ..." then "<left> <right>" per line; encoder.py drops the first line
  // and the empty string after the final newline.
  std::size_t pos = 0;
  std::size_t line_no = 0;
  std::uint32_t rank = 0;
  std::unordered_map<std::uint32_t, std::size_t> line_of_pair;
  std::string left_bytes, right_bytes;
  while (pos < merges.size()) {
    std::size_t eol = merges.find('\n', pos);
    if (eol == std::string_view::npos) eol = merges.size();
    const std::string_view line = merges.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    const std::string field = "line " + std::to_string(line_no);
    if (line_no == 1) {
      if (line.rfind("#version", 0) != 0) {
        throw InputError(merges_name, field,
                         "expected the header \"#version: 0.2\", found \"" +
                             printable_text(line, kQuotedChars) + "\"");
      }
      continue;
    }
    const std::size_t space = line.find(' ');
    if (line.empty() || space == std::string_view::npos || space == 0 ||
        space + 1 == line.size() || line.find(' ', space + 1) != std::string_view::npos) {
      throw InputError(merges_name, field,
                       "expected two tokens separated by one space, found \"" +
                           printable_text(line, kQuotedChars) + "\"");
    }
    char32_t bad = 0;
    if (!spelled_to_bytes(line.substr(0, space), left_bytes, bad) ||
        !spelled_to_bytes(line.substr(space + 1), right_bytes, bad)) {
      throw InputError(merges_name, field, "contains " + describe_char(bad));
    }
    const auto left = id_of.find(left_bytes);
    const auto right = id_of.find(right_bytes);
    const auto merged = id_of.find(left_bytes + right_bytes);
    if (left == id_of.end() || right == id_of.end() || merged == id_of.end()) {
      const char* which = left == id_of.end()     ? "its left part"
                          : right == id_of.end() ? "its right part"
                                                 : "the merged token";
      throw InputError(merges_name, field,
                       std::string(which) + " is not a token of " + encoder_name);
    }
    const std::uint32_t key = pair_key(left->second, right->second);
    if (auto [it, fresh] = line_of_pair.emplace(key, line_no); !fresh) {
      throw InputError(merges_name, field,
                       "the merge is listed twice (first at line " + std::to_string(it->second) +
                           ")");
    }
    tok.merges_.emplace(key, Merge{rank++, merged->second});
  }
  if (line_no == 0) throw InputError(merges_name, "line 1", "empty file; expected \"#version\"");
  return tok;
}

namespace {

constexpr std::size_t kBlock = 64;                   // positions per leaf of the tree of minima
constexpr std::size_t kChunk = std::size_t{1} << 20;  // bytes per block of a long piece
constexpr std::size_t kKeepScratch = std::size_t{1} << 20;  // positions of scratch kept between pieces
constexpr std::size_t kNotFound = static_cast<std::size_t>(-1);

// Resizes to exactly n elements: vector growth would allocate up to twice what a huge piece
// needs.
template <typename T>
void resize_exact(std::vector<T>& v, std::size_t n) {
  if (v.capacity() < n) {
    std::vector<T>().swap(v);
    v.reserve(n);
  }
  v.resize(n);
}

// The highest set bit below position i, or -1.
std::int64_t set_bit_before(const std::vector<std::uint64_t>& bits, std::size_t i) {
  if (i == 0) return -1;
  std::size_t w = (i - 1) >> 6;
  std::uint64_t word = bits[w] & (~std::uint64_t{0} >> (63 - ((i - 1) & 63)));
  for (;;) {
    if (word) return static_cast<std::int64_t>((w << 6) + 63 - static_cast<std::size_t>(std::countl_zero(word)));
    if (w == 0) return -1;
    word = bits[--w];
  }
}

}  // namespace

// BPE in place over symbols_, one entry per byte position of the piece: the symbol starting at
// position i covers token_length_[symbols_[i]] bytes, so the next symbol's position is implied
// and only a bit per position (does a symbol start here?) is needed to find the previous one.
// rank[i] is the rank of the pair starting at i (kNone for none); a tree over blocks of 64
// positions keeps each block's minimum. A round takes the lowest rank r there is and merges its
// occurrences left to right (the leftmost rank <= r after the last merge): encoder.py's bpe(),
// which merges every occurrence of the lowest-ranked pair before looking at the pairs those merges
// create. Pairs created in a round lie at or before its last merge, so the search to the right
// meets only pairs that were there when the round began; one created with a lower rank than r
// (possible only in merge tables whose ranks are not in creation order) waits for the next round.
// A created pair never has rank r itself: its merged side is longer than either part of r.
// Memory per position: 2 bytes of symbol, sizeof(Rank), 1 bit, and the tree's 2 x sizeof(Rank)
// per block; time O(n log n) in the merges.
template <typename Rank>
std::size_t Gpt2Tokenizer::merge_symbols_with(std::vector<Rank>& rank, std::vector<Rank>& tree) {
  constexpr Rank kNone = std::numeric_limits<Rank>::max();
  std::vector<std::uint16_t>& s = symbols_;
  const std::size_t n = s.size();
  if (n < 2) return n;
  const auto pair_rank = [&](std::size_t i) -> Rank {
    const std::size_t j = i + token_length_[s[i]];
    if (j >= n) return kNone;
    const auto it = merges_.find(pair_key(s[i], s[j]));
    return it == merges_.end() ? kNone : static_cast<Rank>(it->second.rank);
  };
  resize_exact(alive_, (n + 63) / 64);
  std::fill(alive_.begin(), alive_.end(), ~std::uint64_t{0});
  resize_exact(rank, n);
  for (std::size_t i = 0; i < n; ++i) rank[i] = pair_rank(i);
  const std::size_t blocks = (n + kBlock - 1) / kBlock;
  const std::size_t leaves = std::bit_ceil(blocks);
  resize_exact(tree, 2 * leaves);
  std::fill(tree.begin(), tree.end(), kNone);
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t hi = std::min(n, (b + 1) * kBlock);
    tree[leaves + b] = *std::min_element(rank.begin() + static_cast<std::ptrdiff_t>(b * kBlock),
                                         rank.begin() + static_cast<std::ptrdiff_t>(hi));
  }
  for (std::size_t k = leaves - 1; k >= 1; --k) tree[k] = std::min(tree[2 * k], tree[2 * k + 1]);

  // The block holding position i changed: its minimum, up the tree while it changes.
  const auto refresh = [&](std::size_t i) {
    const std::size_t b = i / kBlock;
    const std::size_t hi = std::min(n, (b + 1) * kBlock);
    Rank m = kNone;
    for (std::size_t k = b * kBlock; k < hi; ++k) m = std::min(m, rank[k]);
    std::size_t node = leaves + b;
    if (tree[node] == m) return;
    tree[node] = m;
    for (node >>= 1; node >= 1; node >>= 1) {
      const Rank v = std::min(tree[2 * node], tree[2 * node + 1]);
      if (tree[node] == v) break;
      tree[node] = v;
    }
  };
  const auto scan = [&](std::size_t from, std::size_t block, Rank r) {
    const std::size_t hi = std::min(n, (block + 1) * kBlock);
    for (std::size_t k = from; k < hi; ++k) {
      if (rank[k] <= r) return k;
    }
    return kNotFound;
  };
  // The leftmost position >= start whose pair has rank <= r.
  const auto find_from = [&](std::size_t start, Rank r) {
    if (start >= n) return kNotFound;
    if (const std::size_t k = scan(start, start / kBlock, r); k != kNotFound) return k;
    std::size_t node = leaves + start / kBlock;
    for (;;) {  // up to the first right sibling holding such a rank, then down to its leftmost leaf
      if (node == 1) return kNotFound;
      if ((node & 1) == 0 && tree[node + 1] <= r) break;
      node >>= 1;
    }
    for (++node; node < leaves;) node = tree[2 * node] <= r ? 2 * node : 2 * node + 1;
    return scan((node - leaves) * kBlock, node - leaves, r);
  };

  while (tree[1] != kNone) {
    const Rank r = tree[1];
    for (std::size_t q = find_from(0, r); q != kNotFound; q = find_from(q + 1, r)) {
      const std::size_t j = q + token_length_[s[q]];
      s[q] = merges_.find(pair_key(s[q], s[j]))->second.merged;
      alive_[j >> 6] &= ~(std::uint64_t{1} << (j & 63));
      rank[j] = kNone;
      rank[q] = pair_rank(q);
      const std::int64_t p = set_bit_before(alive_, q);
      if (p >= 0) rank[static_cast<std::size_t>(p)] = pair_rank(static_cast<std::size_t>(p));
      refresh(q);
      if (j / kBlock != q / kBlock) refresh(j);
      if (p >= 0 && static_cast<std::size_t>(p) / kBlock != q / kBlock) refresh(static_cast<std::size_t>(p));
    }
  }
  std::size_t out = 0;
  for (std::size_t i = 0; i < n;) {
    const std::uint16_t token = s[i];
    s[out++] = token;
    i += token_length_[token];
  }
  return out;
}

std::size_t Gpt2Tokenizer::merge_symbols() {
  // Ranks fit 2 bytes for tables of fewer than 65535 merges (GPT-2's has 50,000).
  if (merges_.size() < std::numeric_limits<std::uint16_t>::max()) return merge_symbols_with(rank16_, tree16_);
  return merge_symbols_with(rank32_, tree32_);
}

void Gpt2Tokenizer::release_scratch() {
  if (symbols_.capacity() <= kKeepScratch) return;
  std::vector<std::uint16_t>().swap(symbols_);
  std::vector<std::uint16_t>().swap(rank16_);
  std::vector<std::uint16_t>().swap(tree16_);
  std::vector<std::uint32_t>().swap(rank32_);
  std::vector<std::uint32_t>().swap(tree32_);
  std::vector<std::uint64_t>().swap(alive_);
}

void Gpt2Tokenizer::encode_piece(std::string_view piece, std::vector<std::uint16_t>& out) {
  const bool cacheable = piece.size() <= kMaxCachedPieceBytes;
  if (cacheable) {
    if (auto it = cache_.find(std::string(piece)); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  resize_exact(symbols_, piece.size());
  for (std::size_t i = 0; i < piece.size(); ++i) {
    symbols_[i] = byte_token_[static_cast<unsigned char>(piece[i])];
  }
  const auto tokens = static_cast<std::ptrdiff_t>(merge_symbols());
  out.insert(out.end(), symbols_.begin(), symbols_.begin() + tokens);
  if (cacheable) {
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();  // bound memory on huge corpora
    cache_.emplace(std::string(piece), std::vector<std::uint16_t>(symbols_.begin(), symbols_.begin() + tokens));
  }
  release_scratch();
}

void Gpt2Tokenizer::append_long_piece(std::string_view bytes) {
  while (!bytes.empty()) {
    if (long_bytes_.empty() || long_bytes_.back().size() == kChunk) {
      long_bytes_.emplace_back();
      long_bytes_.back().reserve(kChunk);
    }
    std::string& block = long_bytes_.back();
    const std::size_t n = std::min(bytes.size(), kChunk - block.size());
    block.append(bytes.data(), n);
    bytes.remove_prefix(n);
    long_size_ += n;
  }
}

void Gpt2Tokenizer::encode_long_piece(std::vector<std::uint16_t>& out) {
  // The bytes become symbols block by block, each block freed once converted: at most the
  // symbols and one block more than the piece itself.
  resize_exact(symbols_, long_size_);
  std::size_t at = 0;
  for (std::string& block : long_bytes_) {
    for (const unsigned char b : block) symbols_[at++] = byte_token_[b];
    std::string().swap(block);
  }
  std::vector<std::string>().swap(long_bytes_);
  long_ = false;
  long_size_ = 0;
  const std::size_t tokens = merge_symbols();
  out.reserve(out.size() + tokens);  // exactly: growth would double a huge output
  out.insert(out.end(), symbols_.begin(), symbols_.begin() + static_cast<std::ptrdiff_t>(tokens));
  release_scratch();
}

std::size_t Gpt2Tokenizer::take_long_piece(std::string_view text, std::size_t p, std::vector<std::uint16_t>& out) {
  const Gpt2Run run = gpt2_piece_run(text, p);
  // A run of one class after an optional space; a white-space run from its first character.
  const std::size_t from = run != Gpt2Run::kSpace && text[p] == ' ' ? p + 1 : p;
  const Gpt2RunEnd e = continue_gpt2_run(run, text.substr(from), false);
  long_ = true;
  long_run_ = static_cast<std::uint8_t>(run);
  append_long_piece(text.substr(p, from - p + e.end));
  if (e.finished) encode_long_piece(out);
  return from + e.end;
}

std::size_t Gpt2Tokenizer::encode_prefix(std::string_view text, bool at_end,
                                         std::vector<std::uint16_t>& out) {
  std::size_t p = 0;
  if (long_) {
    const Gpt2RunEnd e = continue_gpt2_run(static_cast<Gpt2Run>(long_run_), text, at_end);
    append_long_piece(text.substr(0, e.end));
    if (!e.finished) return e.end;
    encode_long_piece(out);
    p = e.end;
  }
  pieces_.clear();
  std::size_t consumed = p + split_gpt2_pieces(text.substr(p), at_end, pieces_);
  for (std::string_view piece : pieces_) encode_piece(piece, out);
  // An unfinished piece this long stays in the tokenizer, not in the caller's carry.
  if (!at_end && text.size() - consumed > long_piece_bytes_) consumed = take_long_piece(text, consumed, out);
  return consumed;
}

std::vector<std::uint16_t> Gpt2Tokenizer::encode(std::string_view text) {
  std::vector<std::uint16_t> out;
  encode_prefix(text, true, out);
  return out;
}

std::string Gpt2Tokenizer::decode(std::span<const std::uint16_t> tokens) const {
  std::string text;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= token_bytes_.size()) {
      throw Error("GPT-2 decode: token " + std::to_string(i) + " is id " +
                  std::to_string(tokens[i]) + ", outside the vocabulary [0, " +
                  std::to_string(token_bytes_.size() - 1) + "]");
    }
    text += token_bytes_[tokens[i]];
  }
  return text;
}

}  // namespace plait::data
