#pragma once
// plait's tokenizers as Hugging Face tokenizer files (docs/checkpoints.md, "Hugging Face"), so
// that an exported model's AutoTokenizer.from_pretrained(dir) encodes text to the ids it was
// trained on:
//   gpt2  vocab.json and merges.txt: GPT-2's encoder.json and vocab.bpe byte for byte (the
//         files GPT2Tokenizer reads under those names), tokenizer_config.json
//         (GPT2Tokenizer, <|endoftext|> as bos/eos/unk) and special_tokens_map.json.
//   byte  tokenizer.json of the `tokenizers` library: a BPE model without merges whose 256
//         tokens are the bytes spelled in GPT-2's byte alphabet (id = byte value), behind a
//         ByteLevel pre-tokenizer and decoder without the regex split or a prefix space, so
//         every byte of the UTF-8 text is one token as in ByteTokenizer; tokenizer_config.json
//         names PreTrainedTokenizerFast.
// Every file is written atomically and never over an existing one.
#include <cstdint>
#include <string>
#include <vector>

#include "plait/core/directory.h"

namespace plait::data {

// Writes GPT-2's tokenizer files read from `vocab_dir` (encoder.json, vocab.bpe; validated by
// Gpt2Tokenizer::load) into `out`; returns the names written.
std::vector<std::string> write_hf_gpt2_tokenizer(const Directory& out, const std::string& vocab_dir,
                                                 std::int64_t max_length);

// Writes the byte-level tokenizer's files into `out`; returns the names written.
std::vector<std::string> write_hf_byte_tokenizer(const Directory& out, std::int64_t max_length);

// The tokenizer.json text of the byte-level tokenizer (above).
std::string hf_byte_tokenizer_json();

}  // namespace plait::data
