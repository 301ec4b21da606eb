#include "plait/data/hf_tokenizer_json.h"

#include <nlohmann/json.hpp>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/data/gpt2_byte_alphabet.h"
#include "plait/data/utf8_decode.h"

namespace plait::data {
namespace {

using nlohmann::json;

std::string type_of(const json& j) {
  return j.is_object() && j.contains("type") && j.at("type").is_string() ? j.at("type").get<std::string>() : "";
}

// GPT-2's pre-tokenization: a ByteLevel pre-tokenizer with its regex, no prefix space.
bool gpt2_pre_tokenizer(const json& p) {
  return type_of(p) == "ByteLevel" && p.value("use_regex", true) && !p.value("add_prefix_space", false);
}

}  // namespace

HfTokenizerJson read_hf_tokenizer_json(std::string_view text, const std::string& file) {
  const json t = parse_json_text(text, file);
  if (!t.is_object()) throw InputError(file, "(top level)", "expected a tokenizer.json object");
  const auto refuse = [&](const std::string& field, const std::string& what) {
    throw InputError(file, field, what + "; plait reads byte-level BPE with GPT-2's pre-tokenization (and its own "
                                         "byte tokenizer): tokenize the data elsewhere");
  };
  if (!t.contains("model") || type_of(t.at("model")) != "BPE") {
    refuse("model.type", "\"" + (t.contains("model") ? type_of(t.at("model")) : std::string()) + "\" is not implemented");
  }
  const json& model = t.at("model");
  if (model.value("byte_fallback", false)) refuse("model.byte_fallback", "SentencePiece-style BPE (byte fallback)");
  if (t.contains("normalizer") && !t.at("normalizer").is_null()) {
    refuse("normalizer", "a \"" + type_of(t.at("normalizer")) + "\" normalizer (SentencePiece-style spaces) is not implemented");
  }
  if (!model.contains("vocab") || !model.at("vocab").is_object()) refuse("model.vocab", "missing");
  if (!model.contains("merges") || !model.at("merges").is_array()) refuse("model.merges", "missing");
  const json& pre = t.contains("pre_tokenizer") ? t.at("pre_tokenizer") : json(nullptr);
  const json& vocab = model.at("vocab");
  const json& merges = model.at("merges");
  HfTokenizerJson out;
  // plait's byte tokenizer: the 256 bytes in GPT-2's spelling, token b = byte b, no merges.
  if (merges.empty() && vocab.size() == 256) {
    bool bytes = true;
    for (int b = 0; b < 256 && bytes; ++b) {
      const std::string spelled = encode_utf8(gpt2_byte_to_char(static_cast<std::uint8_t>(b)));
      bytes = vocab.contains(spelled) && vocab.at(spelled) == b;
    }
    if (bytes) return out;
  }
  if (!gpt2_pre_tokenizer(pre)) {
    refuse("pre_tokenizer", "a \"" + type_of(pre) + "\" pre-tokenizer other than GPT-2's (ByteLevel with its regex)");
  }
  json encoder = vocab;
  if (t.contains("added_tokens") && t.at("added_tokens").is_array()) {
    for (const json& a : t.at("added_tokens")) {
      if (a.is_object() && a.contains("content") && a.contains("id") && !encoder.contains(a.at("content").get<std::string>())) {
        encoder[a.at("content").get<std::string>()] = a.at("id");
      }
    }
  }
  out.kind = HfTokenizerJson::Kind::gpt2;
  out.encoder_json = encoder.dump();
  out.merges = "#version: 0.2\n";
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    if (m.is_string()) {
      out.merges += m.get<std::string>() + "\n";
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.merges += m[0].get<std::string>() + " " + m[1].get<std::string>() + "\n";
    } else {
      throw InputError(file, "model.merges[" + std::to_string(i) + "]", "expected \"a b\" or [\"a\", \"b\"], found " + m.dump());
    }
  }
  return out;
}

}  // namespace plait::data
