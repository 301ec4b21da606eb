#include "plait/data/gpt2_tokenizer.h"

#include <cstdio>
#include <fstream>
#include <functional>
#include <queue>
#include <sstream>

#include <nlohmann/json.hpp>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/data/gpt2_byte_alphabet.h"
#include "plait/data/gpt2_pretokenizer.h"
#include "plait/data/utf8_decode.h"

namespace plait::data {
namespace {

constexpr std::size_t kMaxVocabulary = 65536;  // ids must fit llm.c's uint16 shards
constexpr std::size_t kMaxCachedPieceBytes = 64;
constexpr std::size_t kMaxCacheEntries = 1 << 18;

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
                             std::string(line.substr(0, 40)) + "\"");
      }
      continue;
    }
    const std::size_t space = line.find(' ');
    if (line.empty() || space == std::string_view::npos || space == 0 ||
        space + 1 == line.size() || line.find(' ', space + 1) != std::string_view::npos) {
      throw InputError(merges_name, field,
                       "expected two tokens separated by one space, found \"" +
                           std::string(line.substr(0, 80)) + "\"");
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

void Gpt2Tokenizer::merge_symbols(std::vector<std::uint16_t>& s) const {
  const int n = static_cast<int>(s.size());
  if (n < 2) return;
  // A doubly linked list over the symbols and a heap of candidate merges ordered by (rank,
  // position). encoder.py merges every occurrence of the lowest-ranked pair, left to right,
  // before looking at pairs those merges create; pairs created during a round are held back
  // until it ends so this matches even for merge tables whose ranks are not in creation order.
  std::vector<int> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) prev[i] = i - 1, next[i] = i + 1 < n ? i + 1 : -1;
  struct Candidate {
    std::uint32_t rank;
    int left;
    std::uint16_t l, r, merged;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  std::vector<Candidate> created;
  const auto consider = [&](int i, std::vector<Candidate>& into) {
    const int j = next[i];
    if (j < 0) return;
    auto it = merges_.find(pair_key(s[i], s[j]));
    if (it != merges_.end()) into.push_back({it->second.rank, i, s[i], s[j], it->second.merged});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i, created);
  for (const Candidate& c : created) heap.push(c);
  created.clear();
  while (!heap.empty()) {
    const std::uint32_t round = heap.top().rank;
    while (!heap.empty() && heap.top().rank == round) {
      const Candidate c = heap.top();
      heap.pop();
      const int i = c.left;
      const int j = next[i];
      if (!alive[i] || j < 0 || s[i] != c.l || s[j] != c.r) continue;  // overtaken
      s[i] = c.merged;
      alive[j] = false;
      next[i] = next[j];
      if (next[j] >= 0) prev[next[j]] = i;
      if (prev[i] >= 0) consider(prev[i], created);
      consider(i, created);
    }
    for (const Candidate& c : created) heap.push(c);
    created.clear();
  }
  int out = 0;
  for (int i = 0; i >= 0; i = next[i]) s[out++] = s[i];
  s.resize(out);
}

void Gpt2Tokenizer::encode_piece(std::string_view piece, std::vector<std::uint16_t>& out) {
  const bool cacheable = piece.size() <= kMaxCachedPieceBytes;
  if (cacheable) {
    if (auto it = cache_.find(std::string(piece)); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<std::uint16_t> symbols(piece.size());
  for (std::size_t i = 0; i < piece.size(); ++i) {
    symbols[i] = byte_token_[static_cast<unsigned char>(piece[i])];
  }
  merge_symbols(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();  // bound memory on huge corpora
    cache_.emplace(std::string(piece), std::move(symbols));
  }
}

std::size_t Gpt2Tokenizer::encode_prefix(std::string_view text, bool at_end,
                                         std::vector<std::uint16_t>& out) {
  pieces_.clear();
  const std::size_t consumed = split_gpt2_pieces(text, at_end, pieces_);
  for (std::string_view piece : pieces_) encode_piece(piece, out);
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
