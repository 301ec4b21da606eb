#pragma once
// Where GPT-2's tokenizer files are looked for when --vocab-dir is not given (plait data
// prepare, plait export hf, plait generate): $PLAIT_GPT2_DIR, else ~/.cache/plait/gpt2, where
// scripts/fetch-gpt2-tokenizer.sh puts them.
#include <string>

namespace plait::cli {

std::string default_gpt2_vocab_dir();

}  // namespace plait::cli
