#pragma once
// Sequences packed from whole documents (data.packing "documents", docs/data.md "Packing"):
// greedy in stream order, each sequence a contiguous run of the stream holding whole documents
// while the next one fits in what is left of its seq tokens; a document that does not fit starts
// the next sequence, and the room it leaves is padding. A document longer than seq is split:
// it fills the room left (if any) and then whole sequences, its last piece sharing a sequence
// with the documents after it. Each piece of a split document is a document of its own within its
// sequence: positions restart at its first token, so GPT-2's learned positions stay below seq <=
// max_seq, and a piece attends only to itself (the earlier pieces lie in other sequences anyway).
//
// The stream's inputs are its first N - 1 tokens (every input needs the next token as its
// target); the target of a document's last token is the next document's first (<|endoftext|>
// with GPT-2), as in stream mode. Sequence i covers inputs [start, start + tokens) and targets
// [start + 1, start + tokens + 1); its positions [tokens, seq) are padding (sequence_documents.h).
//
// The packing is a pure function of (document starts, N, seq): a resumed run that finds the same
// layout (its CRC-32C, in the loader's state) reads the same sequences. Reordering for balance
// (issue 24, step 4) will live here too, with whatever state it needs recorded the same way.
#include <cstdint>
#include <span>
#include <vector>

#include "plait/data/sequence_documents.h"

namespace plait::data {

struct PackedSequence {
  std::int64_t start = 0;   // stream position of its first input
  std::int32_t tokens = 0;  // document tokens; seq - tokens is padding
};

class PackedSequences {
 public:
  // document_starts: stream positions where documents start, increasing, the first 0 (the
  // stream's first token starts a document, even one the validation split cut).
  PackedSequences(std::vector<std::int64_t> document_starts, std::int64_t stream_tokens, int seq);

  int seq() const { return seq_; }
  std::int64_t size() const { return static_cast<std::int64_t>(sequences_.size()); }
  const PackedSequence& at(std::int64_t i) const { return sequences_.at(static_cast<std::size_t>(i)); }
  // The documents inside sequence i.
  SequenceDocuments documents(std::int64_t i) const;

  // Documents of the packed stream (the inputs' N - 1 tokens), before splitting.
  std::int64_t document_count() const { return static_cast<std::int64_t>(starts_.size()); }
  const std::vector<std::int64_t>& document_starts() const { return starts_; }
  std::int64_t stream_tokens() const { return stream_tokens_; }
  // Positions of all sequences that are padding.
  std::int64_t padding_tokens() const { return padding_; }
  // CRC-32C of the layout ((start, tokens) of every sequence, little-endian int64 and int32):
  // what a checkpoint records, so a resume over another layout is refused, not silently misread.
  std::uint32_t layout_crc32c() const { return layout_crc_; }

 private:
  std::vector<std::int64_t> starts_;
  std::int64_t stream_tokens_;
  int seq_;
  std::vector<PackedSequence> sequences_;
  std::int64_t padding_ = 0;
  std::uint32_t layout_crc_ = 0;
};

}  // namespace plait::data
