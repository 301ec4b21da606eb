#pragma once
// The training split's document lengths in machine-readable form, written by plait data prepare
// beside the shards as <name>.lengths.json (docs/data.md, "Documents"), so the simulator and the
// planner can predict packed documents' work from the corpus itself (plait sim / plait plan
// --documents histogram:PATH, document_distribution.h):
//   {"format": "plait-document-lengths", "version": 1, "split": "train",
//    "documents": 41, "tokens": 659290, "longest": 69340,
//    "bins": [[lo, hi, count, tokens], ...]}
// the non-empty bins of length_bin() in increasing order (exact below 128 tokens, 64 per octave
// above), each with its documents and their tokens.
#include <string>
#include <vector>

#include "plait/data/document_lengths.h"

namespace plait::data {

// "<name>.lengths.json"
std::string document_lengths_file_name(const std::string& corpus_name);

std::string document_lengths_text(const DocumentLengths& lengths, const std::string& split);

struct LengthHistogram {
  std::string file;  // where it was read from
  std::int64_t documents = 0, tokens = 0, longest = 0;
  std::vector<LengthBin> bins;
};

// Reads a lengths file, or the one a prepared data directory holds (exactly one *.lengths.json).
// Every problem is an InputError naming the file (or the directory) and the field: a missing
// file, another format or version, bins out of order, overlapping or outside one length_bin, counts
// or tokens that disagree with the totals.
LengthHistogram read_document_lengths(const std::string& path);

}  // namespace plait::data
