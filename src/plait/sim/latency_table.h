#pragma once
// Measured per-layer latencies in the shape of Zorse's model_latencies.json (benson-guo/zorse,
// data/model_latencies.json; ../shared/reference/zorse.md), the one format plait uses for device
// profiles, whether shipped (share/profiles/zorse/) or measured on this machine (`plait profile`):
//
//   { "<model>": { "<device type>": { "<seq>": { "<dtype>":
//       [[f_slope, f_intercept], [b_slope, b_intercept],
//        [forward ms at micro-batch 1..N], [backward ms at micro-batch 1..N]] } } } }
//
// per transformer layer, milliseconds; the fits are t(b) = slope * b + intercept; backward is B
// and W together. The two sample lists are optional (some Zorse entries carry only the fits).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plait/spec/model_spec.h"
#include "plait/sim/device_profile.h"

namespace plait::sim {

struct LatencyEntry {
  std::string model, device, dtype;
  std::int64_t seq = 0;
  double forward_slope_ms = 0, forward_intercept_ms = 0;
  double backward_slope_ms = 0, backward_intercept_ms = 0;
  std::vector<double> forward_ms, backward_ms;  // measured at micro-batch 1..N (may be empty)
};

struct LatencyTable {
  std::string path;
  std::vector<LatencyEntry> entries;
  std::vector<std::string> devices;  // every device key of the file, also those without a usable entry
};

// Reads a table. strict: every entry must be well formed (an InputError names the file and the
// entry "<model>.<device>.<seq>.<dtype>"), as for profiles users write or plait measures;
// lenient: entries without a usable fit are skipped (some of the shipped Zorse data).
LatencyTable read_latency_table(const std::string& path, bool strict);

// The table as JSON in the format above (what `plait profile` writes).
nlohmann::json latency_table_json(const std::vector<LatencyEntry>& entries);

// The curve (seconds against samples) of one entry's measured milliseconds at micro-batch 1..N
// (latency_curve.h's fit), or the entry's own line where it has fewer than two samples.
LatencyCurve entry_curve(const std::vector<double>& ms, double slope_ms, double intercept_ms);

// Least-squares line through (b, ms) for b = 1..N: {slope, intercept} (how Zorse fits).
std::pair<double, double> fit_latency_line(const std::vector<double>& ms);

// A provisional entry from FLOPs alone (before a device is measured): one layer's forward
// FLOPs per sample (plait's formula, seq1f1b.md) x b at a sustained rate, backward twice that,
// for micro-batch sizes 1..max_microbatch, with the fitted lines.
LatencyEntry flops_latency_entry(const std::string& name, const std::string& device, const std::string& dtype,
                                 const spec::ModelSpec& model, std::int64_t seq, double flops_per_second,
                                 int max_microbatch);

// The family a measured model's name says ("deepspeedllama_7b" -> llama, "deepspeedgpt_1.3b" ->
// gpt2), or nullopt (BERT, ViT, Mistral, ...: not a family plait builds).
std::optional<spec::Family> measured_family(const std::string& model);

// A device profile from `table` for `device` and `dtype`, for `model` — never a substitute the
// user did not choose:
//   - the preferred model (preference.model: a preset's table, --profile-model, a cluster spec's
//     "profile_model") if it was measured on this device;
//   - else the table's only model, if it holds one (a profile of this machine);
//   - else, with a preferred model, an error;
//   - else the measured model of the same family and hidden size (`stats`: Zorse's
//     model_stats.json), the alphabetically first if several are;
//   - else an error listing the family's measured models and how to choose one.
// Of the chosen model, the measured sequence length closest to preference.seq (ratio; the longer
// on ties; 0: the longest). The unit cost is scaled by FLOPs from the measured per-sample layer
// FLOPs: from `stats` (2 * seq * parameters_per_layer + 2 * hidden * seq^2) when the model is
// there, else from `model` by plait's formula (the profile is then assumed to be measured on this
// shape). `name` labels the profile.
DeviceProfile measured_device_profile(const LatencyTable& table, const nlohmann::json* stats,
                                      const std::string& device, const std::string& dtype,
                                      const spec::ModelSpec& model,
                                      const LatencyPreference& preference, const std::string& name);

}  // namespace plait::sim
