#include "plait/runtime/resume_recipe.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <utility>

#include "plait/core/error.h"
#include "plait/core/printable_text.h"

namespace plait::runtime {
namespace {

// The config as the manifest would hold it (to_json), so that both sides compare as JSON values.
struct Section {
  const char* what;
  std::vector<const char*> fields;
};

const Section kRecipe[] = {
    {"the optimizer", {"weight_decay", "beta1", "beta2", "eps", "grad_clip"}},
    {"the learning-rate schedule", {"lr", "min_lr", "warmup_steps", "steps"}},
    {"the batch", {"seq", "microbatch_size"}},
};

// Two JSON values as text with just enough digits to tell them apart, each no longer than its
// shortest exact form: the lr / 10 default 0.00030000000000000003 beside 0.0001 reads
// "0.0003 -> 0.0001", beside a typed 0.0003 (another double) "0.00030000000000000003 -> 0.0003".
std::pair<std::string, std::string> value_texts(const nlohmann::json& a, const nlohmann::json& b) {
  // The manifest is input: a value of any size or content is cut short and made printable.
  if (!a.is_number_float() || !b.is_number_float()) return {printable_text(a.dump(), 40), printable_text(b.dump(), 40)};
  std::string x, y;
  for (int digits = 6; digits <= 17; ++digits) {
    char t[40];
    std::snprintf(t, sizeof t, "%.*g", digits, a.get<double>());
    x = t;
    std::snprintf(t, sizeof t, "%.*g", digits, b.get<double>());
    y = t;
    if (x != y) break;
  }
  const std::string exact_a = a.dump(), exact_b = b.dump();
  return {exact_a.size() < x.size() ? exact_a : x, exact_b.size() < y.size() ? exact_b : y};
}

// The model fields a user sets first (a change of "hidden" also changes the "ffn_hidden" it
// implies: the error names the one set), then the rest.
const char* const kModelOrder[] = {"family", "layers", "hidden", "heads", "kv_heads", "vocab", "max_seq"};

// Both sides as to_json writes them (every field explicit, defaults filled in), so that only
// values can differ.
void check_same_model(const JobConfig& saved, const JobConfig& job, const std::string& manifest) {
  const nlohmann::json theirs = to_json(saved.run).at("model");
  const nlohmann::json ours = to_json(job.run).at("model");
  std::vector<std::string> keys(std::begin(kModelOrder), std::end(kModelOrder));
  for (const auto& [key, value] : ours.items()) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  std::string first, others;
  for (const std::string& key : keys) {
    if (!ours.contains(key) || (theirs.contains(key) && theirs[key] == ours[key])) continue;
    const auto [was, now] = value_texts(theirs.contains(key) ? theirs[key] : nlohmann::json("none"), ours[key]);
    if (first.empty()) {
      first = key;
      others = now + ", but the checkpoint " + manifest + " was written by a model with " + was;
    } else {
      others += "; model." + key + " " + now + " (the checkpoint's " + was + ")";
    }
  }
  if (!first.empty()) {
    throw InputError(job.run.source, "model." + first,
                     others + "; a checkpoint loads only into the model it was written for");
  }
}

}  // namespace

std::string describe(const RecipeChange& c) { return c.field + " " + c.was + " -> " + c.now; }

std::vector<RecipeChange> recipe_changes(const nlohmann::json& saved_config, const nlohmann::json& rng_state,
                                         const JobConfig& job, const std::string& manifest) {
  const JobConfig saved = parse_job_config(saved_config, manifest + " (config)");
  check_same_model(saved, job, manifest);
  const nlohmann::json theirs = to_json(saved.run).at("train");
  const nlohmann::json ours = to_json(job.run).at("train");
  std::vector<RecipeChange> changes;
  const auto compare = [&](const std::string& field, const nlohmann::json& was, const nlohmann::json& now,
                           const char* what) {
    if (was == now) return;
    const auto [a, b] = value_texts(was, now);
    changes.push_back({field, a, b, what});
  };
  for (const Section& section : kRecipe) {
    for (const char* f : section.fields) compare(std::string("train.") + f, theirs.at(f), ours.at(f), section.what);
  }
  // The whole step's micro-batches: train.microbatches counts a replica's in the generated
  // form, so a layout with other data parallelism may keep the global batch with another value.
  compare("train.microbatches (micro-batches per step, all replicas)", saved.global_microbatches(),
          job.global_microbatches(), "the batch");
  // The seed the checkpoint's run drew from: its RNG state's (a checkpoint written before plait
  // refused seed changes may record another seed in its config).
  nlohmann::json seed = theirs.at("seed");
  if (rng_state.is_object() && rng_state.contains("seed") && rng_state["seed"].is_number_integer()) {
    seed = rng_state["seed"];
  }
  compare("train.seed", seed, ours.at("seed"), "the seed");
  return changes;
}

std::vector<RecipeChange> check_resume_recipe(const nlohmann::json& saved_config, const nlohmann::json& rng_state,
                                              const JobConfig& job, const std::string& manifest, bool allow) {
  std::vector<RecipeChange> changes = recipe_changes(saved_config, rng_state, job, manifest);
  if (changes.empty() || allow) return changes;
  std::string list;
  for (const RecipeChange& c : changes) list += (list.empty() ? "" : ", ") + describe(c) + " (" + c.what + ")";
  throw InputError(job.run.source, changes.front().field.substr(0, changes.front().field.find(' ')),
                   "resuming " + manifest + " would change the training recipe: " + list +
                       " (the checkpoint's value -> this run's); set them back, or pass "
                       "--allow-recipe-change to continue with the change");
}

}  // namespace plait::runtime
