#pragma once
// Helpers for tokenizer tests: spelling bytes in GPT-2's byte alphabet, small synthetic
// vocabularies, and the location of the real one (fetched by the ctest fixture).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plait/data/gpt2_byte_alphabet.h"
#include "plait/data/utf8_decode.h"

namespace plait::data::testing {

inline std::string utf8(char32_t c) { return encode_utf8(c); }

// Raw bytes spelled in GPT-2's byte alphabet, as encoder.json and vocab.bpe spell tokens.
inline std::string spell(const std::string& bytes) {
  std::string s;
  for (unsigned char b : bytes) s += utf8(gpt2_byte_to_char(b));
  return s;
}

// A vocabulary of the 256 bytes (ids 0..255 in byte order) plus the given merges (raw bytes),
// each merge's result taking the next id; returns {encoder.json, vocab.bpe}.
struct SmallVocabulary {
  std::string encoder_json;
  std::string merges;
};
inline SmallVocabulary small_vocabulary(
    const std::vector<std::pair<std::string, std::string>>& merges) {
  nlohmann::json enc = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) enc[spell(std::string(1, static_cast<char>(b)))] = b;
  std::string bpe = "#version: 0.2\n";
  int next = 256;
  for (const auto& [l, r] : merges) {
    const std::string merged = spell(l + r);
    if (!enc.contains(merged)) enc[merged] = next++;
    bpe += spell(l) + " " + spell(r) + "\n";
  }
  return {enc.dump(), bpe};
}

// The real GPT-2 vocabulary's directory, or "" if it is not there (offline).
inline std::string gpt2_vocabulary_dir() {
  const char* env = std::getenv("PLAIT_GPT2_DIR");
  const std::string dir = env ? env : PLAIT_GPT2_TEST_DIR;
  return std::filesystem::exists(dir + "/encoder.json") && std::filesystem::exists(dir + "/vocab.bpe")
             ? dir
             : "";
}

}  // namespace plait::data::testing
