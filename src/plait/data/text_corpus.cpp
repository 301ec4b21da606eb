#include "plait/data/text_corpus.h"

#include <fstream>
#include <sstream>

#include "plait/core/error.h"
#include "plait/data/input_files.h"

namespace plait::data {

TextCorpus read_text_corpus(const std::vector<std::string>& paths) {
  TextCorpus corpus;
  for (const std::string& file : list_input_files(paths)) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw InputError(file, "(file)", "cannot open the file");
    std::stringstream s;
    s << in.rdbuf();
    const std::string bytes = s.str();
    if (bytes.empty() || bytes.find('\0') != std::string::npos) continue;  // empty or binary
    corpus.text += bytes;
    corpus.files.push_back(file);
  }
  if (corpus.text.empty()) {
    throw InputError(paths.empty() ? "(none)" : paths.front(), "(file)",
                     "no text found (binary or empty files only)");
  }
  return corpus;
}

}  // namespace plait::data
