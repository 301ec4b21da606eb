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
// Memory (docs/data.md, "Memory"): streaming holds at most one unfinished piece, as its bytes;
// the BPE of a piece of n bytes holds 2 bytes of symbol per byte, a 2-byte rank (4 with more
// than 65534 merges) per byte, one bit per byte and a tree of block minima (n/16 bytes): about
// 4.2 n (6.2 n), plus the piece's tokens as the caller's output.
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
  // equals encode() of the whole stream. The carry stays under long_piece_bytes() + 8 bytes:
  // the bytes of a longer unfinished piece are consumed into the tokenizer, which encodes the
  // piece once it ends (so a stream of one piece of any length is read once, not cut again).
  std::size_t encode_prefix(std::string_view text, bool at_end, std::vector<std::uint16_t>& out);
  // How long an unfinished piece grows in the caller's carry before the tokenizer takes it
  // (64 KiB; smaller in tests).
  std::size_t long_piece_bytes() const { return long_piece_bytes_; }
  void set_long_piece_bytes(std::size_t n) { long_piece_bytes_ = n < 16 ? 16 : n; }

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
  // BPE of symbols_ (one byte token per byte) in place; returns the number of tokens.
  std::size_t merge_symbols();
  template <typename Rank>
  std::size_t merge_symbols_with(std::vector<Rank>& rank, std::vector<Rank>& tree);
  // Takes over the unfinished piece at text[p, ...) (long_ is then set); returns the bytes of
  // text consumed.
  std::size_t take_long_piece(std::string_view text, std::size_t p, std::vector<std::uint16_t>& out);
  void append_long_piece(std::string_view bytes);
  void encode_long_piece(std::vector<std::uint16_t>& out);
  void release_scratch();

  std::vector<std::string> token_bytes_;               // id -> raw bytes
  std::vector<std::uint16_t> token_length_;            // id -> its byte count
  std::uint16_t byte_token_[256] = {};                 // byte -> its single-byte token
  std::unordered_map<std::uint32_t, Merge> merges_;    // (left, right) -> rank, result
  std::optional<std::uint16_t> end_of_text_;
  std::unordered_map<std::string, std::vector<std::uint16_t>> cache_;
  std::vector<std::string_view> pieces_;               // scratch
  // BPE scratch, by byte position of the piece: symbols, the rank of the pair starting there,
  // which positions still start a symbol, and minima of the ranks over blocks.
  std::vector<std::uint16_t> symbols_;
  std::vector<std::uint16_t> rank16_, tree16_;
  std::vector<std::uint32_t> rank32_, tree32_;
  std::vector<std::uint64_t> alive_;
  // An unfinished piece longer than long_piece_bytes_: its bytes so far in blocks of 1 MiB (a
  // growing string would hold up to twice its size while it doubles), and its run.
  std::size_t long_piece_bytes_ = 64 * 1024;
  bool long_ = false;
  std::uint8_t long_run_ = 0;  // Gpt2Run
  std::vector<std::string> long_bytes_;
  std::size_t long_size_ = 0;
};

}  // namespace plait::data
