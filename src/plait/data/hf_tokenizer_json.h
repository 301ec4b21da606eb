#pragma once
// A Hugging Face tokenizer.json (the `tokenizers` library's format) read as one of plait's
// tokenizers, where it is one (docs/checkpoints.md, "Hugging Face"):
//   - byte-level BPE with GPT-2's pre-tokenization: model BPE (vocab, merges as "a b" strings or
//     [a, b] pairs), a ByteLevel pre-tokenizer using its regex (GPT-2's pattern,
//     gpt2_pretokenizer.h), no normalizer, no byte fallback: GPT-2's own tokenizer.json and
//     those of models that reuse it. Its added tokens (<|endoftext|>) join the vocabulary.
//   - plait's byte-level tokenizer (hf_tokenizer_files.h): a BPE without merges over the 256
//     bytes, whatever the pre-tokenizer splits.
// Anything else is refused in one line naming the field: SentencePiece-style BPE (LLaMA 1-2,
// Mistral: a normalizer or Metaspace pre-tokenizer replacing spaces by U+2581, byte_fallback),
// other split patterns (Llama 3's Split regex), WordPiece, Unigram. Those models' weights still
// load (init.from); their data must be tokenized elsewhere.
#include <string>
#include <string_view>

namespace plait::data {

struct HfTokenizerJson {
  enum class Kind { byte, gpt2 } kind = Kind::byte;
  // gpt2: the files Gpt2Tokenizer::parse reads (encoder.json's and vocab.bpe's text).
  std::string encoder_json, merges;
};

HfTokenizerJson read_hf_tokenizer_json(std::string_view text, const std::string& file);

}  // namespace plait::data
