#pragma once
// The GPT-2 byte-level BPE tokenizer (Radford et al. 2019, section 2.2; OpenAI gpt-2
// src/encoder.py), read from its two standard files:
//   encoder.json  {"<token spelled in the byte alphabet>": id, ...}, ids 0..n-1
//   vocab.bpe     "#version: 0.2", then one merge "<left> <right>" per line, highest
//                 priority (rank 0) first
// Encoding: UTF-8 text -> pieces (gpt2_pretokenizer.h) -> each piece's bytes as single-byte
// tokens -> repeatedly merge the adjacent pair with the lowest rank (all its occurrences, left
// to right) until no pair has a rank. Special tokens such as <|endoftext|> are never produced
// from text (as in encoder.py); callers insert end_of_text() between documents.
// Decoding concatenates each id's bytes, so decode(encode(s)) == s for any bytes s.
//
// Not thread-safe: encode() fills a cache of encoded pieces. Use one tokenizer per thread.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace plait::data {

class Gpt2Tokenizer {
 public:
  // Reads <dir>/encoder.json and <dir>/vocab.bpe (scripts/fetch-gpt2-tokenizer.sh fetches them).
  static Gpt2Tokenizer load(const std::string& dir);

  // From the files' contents. Every error is an InputError naming the file and the key or line:
  // ids must be 0..n-1 with n <= 65536 (llm.c shards store uint16), every key must be spelled in
  // the byte alphabet, all 256 single bytes must be tokens, and each merge's two parts and
  // their concatenation must be tokens, with no merge listed twice.
  static Gpt2Tokenizer parse(std::string_view encoder_json, std::string_view merges,
                             const std::string& encoder_name, const std::string& merges_name);

  std::vector<std::uint16_t> encode(std::string_view text);

  // Streaming form: appends the tokens of a prefix of `text` and returns the bytes consumed
  // (all of text when at_end). Carry the rest into the next call; the concatenated output
  // equals encode() of the whole stream.
  std::size_t encode_prefix(std::string_view text, bool at_end, std::vector<std::uint16_t>& out);

  // Throws Error naming the position of an id outside the vocabulary.
  std::string decode(std::span<const std::uint16_t> tokens) const;

  int vocab_size() const { return static_cast<int>(token_bytes_.size()); }
  std::optional<std::uint16_t> end_of_text() const { return end_of_text_; }
  const std::string& token_bytes(std::uint16_t id) const { return token_bytes_.at(id); }

 private:
  struct Merge {
    std::uint32_t rank;
    std::uint16_t merged;
  };
  static std::uint32_t pair_key(std::uint16_t left, std::uint16_t right) {
    return (static_cast<std::uint32_t>(left) << 16) | right;
  }
  void encode_piece(std::string_view piece, std::vector<std::uint16_t>& out);
  void merge_symbols(std::vector<std::uint16_t>& symbols) const;

  std::vector<std::string> token_bytes_;               // id -> raw bytes
  std::uint16_t byte_token_[256] = {};                 // byte -> its single-byte token
  std::unordered_map<std::uint32_t, Merge> merges_;    // (left, right) -> rank, result
  std::optional<std::uint16_t> end_of_text_;
  std::unordered_map<std::string, std::vector<std::uint16_t>> cache_;
  std::vector<std::string_view> pieces_;               // scratch
};

}  // namespace plait::data
