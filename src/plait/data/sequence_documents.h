#pragma once
// The documents inside one sequence of a micro-batch, as a loader packed them: what attention's
// document masks and per-document positions read (issue 24). Offsets are token positions in the
// sequence; positions [tokens, seq) are padding (their targets are kPaddingTarget).
#include <cstdint>
#include <vector>

namespace plait::data {

// The target of a padding position: no token to predict; the loss must skip it.
constexpr std::int32_t kPaddingTarget = -1;
// The input token at a padding position (any valid id: its outputs are never used).
constexpr std::int32_t kPaddingInput = 0;

struct SequenceDocuments {
  // Where each document starts, increasing; starts[0] == 0. Document j spans
  // [starts[j], starts[j + 1]) (the last one up to `tokens`).
  std::vector<std::int32_t> starts;
  std::int32_t tokens = 0;  // positions holding document tokens; the rest is padding
  // The first document is the continuation of one split at the previous sequence's end (its
  // first token is not a document's first token: no <|endoftext|> there).
  bool continues = false;
  bool operator==(const SequenceDocuments&) const = default;
};

}  // namespace plait::data
