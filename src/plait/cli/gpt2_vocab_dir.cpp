#include "plait/cli/gpt2_vocab_dir.h"

#include <cstdlib>

namespace plait::cli {

std::string default_gpt2_vocab_dir() {
  if (const char* dir = std::getenv("PLAIT_GPT2_DIR")) return dir;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/plait/gpt2";
}

}  // namespace plait::cli
