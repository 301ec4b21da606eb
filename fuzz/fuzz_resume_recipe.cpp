// Fuzzes what `plait train --resume` reads from a checkpoint's manifest beyond its own parser
// (runtime/resume_recipe.h, training_data.h): the recipe comparison of its config and RNG state
// with a run's config, and the comparison of its data_position's sources with a run's data. For a
// manifest the parser accepts:
//   - comparing with the default run, or with the manifest's own config, ends in a result or a
//     plait::Error (a config that does not parse, a model that differs), never anything else;
//   - the manifest's own config, when it parses, compared with itself (without an RNG state) is
//     neither refused nor changed;
//   - the sources comparison gives a message or a plait::Error, and a record compared with
//     itself gives none.
#include <cstdint>
#include <string_view>

#include "plait/checkpoint/checkpoint_manifest.h"
#include "plait/core/error.h"
#include "plait/runtime/parallel_config.h"
#include "plait/runtime/resume_recipe.h"
#include "plait/runtime/training_data.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace plait::runtime;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  plait::checkpoint::CheckpointManifest m;
  try {
    m = plait::checkpoint::parse_manifest(text, "manifest.json");
  } catch (const plait::Error&) {
    return 0;
  }
  static const JobConfig fallback = job_from_run_config(default_run_config());
  try {
    (void)check_resume_recipe(m.config, m.rng_state, fallback, "manifest.json", false);
  } catch (const plait::Error&) {
  }
  JobConfig own;
  bool parsed = true;
  try {
    own = parse_job_config(m.config, "manifest.json (config)");
  } catch (const plait::Error&) {
    parsed = false;
  }
  if (parsed) {
    try {
      if (!recipe_changes(m.config, nlohmann::json::object(), own, "manifest.json").empty()) __builtin_trap();
    } catch (const plait::Error&) {
      __builtin_trap();  // a config that parses refused against itself
    }
  }
  const nlohmann::json ours = nlohmann::json::array(
      {{{"name", "corpus_train_000000.bin"}, {"tokens", 30000}, {"crc32c", "0x1a2b3c4d"}}});
  try {
    (void)data_sources_difference(m.data_position, ours, "manifest.json");
    if (m.data_position.is_object() && m.data_position.contains("sources") && m.data_position["sources"].is_array()) {
      // Only well-formed records can be "ours" (TrainingData writes them).
      bool well_formed = true;
      for (const auto& s : m.data_position["sources"]) {
        well_formed = well_formed && s.is_object() && s.contains("tokens") && s["tokens"].is_number_integer() &&
                      s.contains("crc32c") && s["crc32c"].is_string();
      }
      if (well_formed && !data_sources_difference(m.data_position, m.data_position["sources"], "manifest.json").empty()) {
        __builtin_trap();
      }
    }
  } catch (const plait::Error&) {
  }
  return 0;
}
