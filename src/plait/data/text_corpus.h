#pragma once
// A text corpus read from files and directories, as the bytes the byte-level tokenizer turns
// into tokens. Directories are read recursively in name order; symbolic links and binary files
// (any NUL byte, e.g. fortune's .dat indexes) are skipped, so a directory of text can be named
// as it is installed.
#include <cstdint>
#include <string>
#include <vector>

namespace plait::data {

struct TextCorpus {
  std::string text;
  std::vector<std::string> files;  // the files read, in order
};

// Throws InputError naming the path if it does not exist or yields no text.
TextCorpus read_text_corpus(const std::vector<std::string>& paths);

}  // namespace plait::data
