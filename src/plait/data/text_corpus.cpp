#include "plait/data/text_corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "plait/core/error.h"

namespace plait::data {
namespace fs = std::filesystem;
namespace {

void read_one(const fs::path& file, TextCorpus& corpus) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(file.string(), "(file)", "cannot open the file");
  std::stringstream s;
  s << in.rdbuf();
  std::string bytes = s.str();
  if (bytes.empty() || bytes.find('\0') != std::string::npos) return;  // empty or binary
  corpus.text += bytes;
  corpus.files.push_back(file.string());
}

}  // namespace

TextCorpus read_text_corpus(const std::vector<std::string>& paths) {
  TextCorpus corpus;
  for (const std::string& p : paths) {
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(p, ec);
    if (ec || !fs::exists(st)) throw InputError(p, "(file)", "no such file or directory");
    if (fs::is_directory(st)) {
      std::vector<fs::path> files;
      for (const auto& e : fs::recursive_directory_iterator(p)) {
        if (e.is_regular_file() && !e.is_symlink()) files.push_back(e.path());
      }
      std::sort(files.begin(), files.end());
      for (const auto& f : files) read_one(f, corpus);
    } else {
      read_one(p, corpus);
    }
  }
  if (corpus.text.empty()) {
    throw InputError(paths.empty() ? "(none)" : paths.front(), "(file)",
                     "no text found (binary or empty files only)");
  }
  return corpus;
}

}  // namespace plait::data
