#include "plait/sim/latency_table.h"

#include <charconv>
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <tuple>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/spec/model_spec.h"

namespace plait::sim {

namespace {

bool is_pair(const nlohmann::json& v) {
  return v.is_array() && v.size() == 2 && v[0].is_number() && v[1].is_number();
}

bool is_number_list(const nlohmann::json& v) {
  if (!v.is_array()) return false;
  for (const auto& x : v) {
    if (!x.is_number()) return false;
  }
  return true;
}

std::vector<double> numbers(const nlohmann::json& v) {
  std::vector<double> out;
  for (const auto& x : v) out.push_back(x.get<double>());
  return out;
}

// "" when `entry` is a usable measurement, else what is wrong with it.
std::string entry_problem(const nlohmann::json& entry) {
  if (!entry.is_array() || (entry.size() != 2 && entry.size() != 4)) {
    return "expected [[f_slope, f_intercept], [b_slope, b_intercept], [forward ms...], [backward ms...]]";
  }
  if (!is_pair(entry[0])) return "expected [f_slope, f_intercept] first";
  if (!is_pair(entry[1])) return "expected [b_slope, b_intercept] second";
  if (entry.size() == 4 && (!is_number_list(entry[2]) || !is_number_list(entry[3]))) {
    return "expected lists of forward and backward milliseconds third and fourth";
  }
  if (!(entry[0][0].get<double>() > 0) || !(entry[1][0].get<double>() > 0)) {
    return "expected positive slopes (milliseconds per sample)";
  }
  return {};
}

}  // namespace

LatencyTable read_latency_table(const std::string& path, bool strict) {
  const nlohmann::json json = read_json_file(path);
  LatencyTable table;
  table.path = path;
  auto require_object = [&](const nlohmann::json& v, const std::string& field) {
    if (!v.is_object()) throw InputError(path, field, "expected a JSON object, found " + std::string(v.type_name()));
  };
  require_object(json, "(top level)");
  for (const auto& [model, by_device] : json.items()) {
    require_object(by_device, model);
    for (const auto& [device, by_seq] : by_device.items()) {
      require_object(by_seq, model + "." + device);
      if (std::find(table.devices.begin(), table.devices.end(), device) == table.devices.end()) {
        table.devices.push_back(device);
      }
      for (const auto& [seq_text, by_dtype] : by_seq.items()) {
        const std::string where = model + "." + device + "." + seq_text;
        std::int64_t seq = 0;
        const auto res = std::from_chars(seq_text.data(), seq_text.data() + seq_text.size(), seq);
        if (res.ec != std::errc() || res.ptr != seq_text.data() + seq_text.size() || seq < 1) {
          throw InputError(path, where, "expected a sequence length (a positive integer) as the key");
        }
        // One spelling per length: "0512" beside "512" would otherwise be two entries for one key
        // (found by fuzz_latency_table).
        if (seq_text[0] == '0') {
          throw InputError(path, where, "expected a sequence length without leading zeros as the key");
        }
        require_object(by_dtype, where);
        for (const auto& [dtype, entry] : by_dtype.items()) {
          const std::string problem = entry_problem(entry);
          if (!problem.empty()) {
            if (strict) throw InputError(path, where + "." + dtype, problem);
            continue;
          }
          LatencyEntry e;
          e.model = model;
          e.device = device;
          e.dtype = dtype;
          e.seq = seq;
          e.forward_slope_ms = entry[0][0].get<double>();
          e.forward_intercept_ms = entry[0][1].get<double>();
          e.backward_slope_ms = entry[1][0].get<double>();
          e.backward_intercept_ms = entry[1][1].get<double>();
          if (entry.size() == 4) {
            e.forward_ms = numbers(entry[2]);
            e.backward_ms = numbers(entry[3]);
          }
          table.entries.push_back(std::move(e));
        }
      }
    }
  }
  if (strict && table.entries.empty()) throw InputError(path, "(top level)", "no measurements");
  return table;
}

nlohmann::json latency_table_json(const std::vector<LatencyEntry>& entries) {
  nlohmann::json out = nlohmann::json::object();
  for (const LatencyEntry& e : entries) {
    out[e.model][e.device][std::to_string(e.seq)][e.dtype] = {
        {e.forward_slope_ms, e.forward_intercept_ms},
        {e.backward_slope_ms, e.backward_intercept_ms},
        e.forward_ms,
        e.backward_ms,
    };
  }
  return out;
}

LatencyCurve entry_curve(const std::vector<double>& ms, double slope_ms, double intercept_ms) {
  if (ms.size() < 2) return line_curve(slope_ms * 1e-3, intercept_ms * 1e-3);
  std::vector<double> samples, seconds;
  for (std::size_t i = 0; i < ms.size(); ++i) {
    samples.push_back(static_cast<double>(i + 1));
    seconds.push_back(ms[i] * 1e-3);
  }
  return fit_latency_curve(samples, seconds);
}

std::pair<double, double> fit_latency_line(const std::vector<double>& ms) {
  const double n = static_cast<double>(ms.size());
  if (ms.empty()) return {0.0, 0.0};
  if (ms.size() == 1) return {ms[0], 0.0};
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < ms.size(); ++i) {
    const double x = static_cast<double>(i + 1);
    sx += x;
    sy += ms[i];
    sxx += x * x;
    sxy += x * ms[i];
  }
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  return {slope, (sy - slope * sx) / n};
}

LatencyEntry flops_latency_entry(const std::string& name, const std::string& device, const std::string& dtype,
                                 const spec::ModelSpec& model, std::int64_t seq, double flops_per_second,
                                 int max_microbatch) {
  LatencyEntry e;
  e.model = name;
  e.device = device;
  e.dtype = dtype;
  e.seq = seq;
  const double flops = model.layer_forward_flops(seq);
  for (int b = 1; b <= max_microbatch; ++b) {
    e.forward_ms.push_back(1e3 * b * flops / flops_per_second);
    e.backward_ms.push_back(2e3 * b * flops / flops_per_second);
  }
  std::tie(e.forward_slope_ms, e.forward_intercept_ms) = fit_latency_line(e.forward_ms);
  std::tie(e.backward_slope_ms, e.backward_intercept_ms) = fit_latency_line(e.backward_ms);
  return e;
}

std::optional<spec::Family> measured_family(const std::string& model) {
  if (model.find("llama") != std::string::npos) return spec::Family::llama;
  if (model.find("gpt") != std::string::npos) return spec::Family::gpt2;
  return std::nullopt;
}

DeviceProfile measured_device_profile(const LatencyTable& table, const nlohmann::json* stats,
                                      const std::string& device, const std::string& dtype,
                                      const spec::ModelSpec& model,
                                      const LatencyPreference& preference, const std::string& name) {
  std::vector<const LatencyEntry*> candidates;
  std::set<std::string> models, devices;
  for (const LatencyEntry& e : table.entries) {
    devices.insert(e.device);
    if (e.device == device && e.dtype == dtype) {
      candidates.push_back(&e);
      models.insert(e.model);
    }
  }
  if (candidates.empty()) {
    std::string list;
    for (const std::string& d : devices) list += (list.empty() ? "" : ", ") + d;
    throw Error(name + ": " + table.path +
                (devices.count(device) ? " has no " + dtype + " latencies for " + device
                                       : " has no device type '" + device + "'; expected one of " + list));
  }
  auto has_stats = [&](const std::string& m) {
    return stats && stats->contains(m) && (*stats)[m].contains("hidden_size") &&
           (*stats)[m].contains("parameters_per_layer");
  };
  std::string chosen, because;
  if (models.count(preference.model)) {
    chosen = preference.model;
    because = "named for this model";
  } else if (models.size() == 1) {
    chosen = *models.begin();  // a profile of one model, e.g. this machine's (`plait profile`)
    because = "the table's only model";
  } else if (!preference.model.empty()) {
    throw Error(name + ": " + table.path + " has no " + dtype + " latencies of " + preference.model +
                " on " + device + " (the table chosen for this model); choose another with "
                "--profile-model or the cluster spec's \"profile_model\"");
  } else {
    // The same family and hidden size: the per-layer latency scales by FLOPs from there.
    std::string family_models;
    for (const std::string& m : models) {
      if (measured_family(m) != model.family || !has_stats(m)) continue;
      const int hidden = (*stats)[m]["hidden_size"].get<int>();
      family_models += (family_models.empty() ? "" : ", ") + m + " (hidden " + std::to_string(hidden) + ")";
      if (hidden == model.hidden && chosen.empty()) {
        chosen = m;
        because = "same family and hidden size";
      }
    }
    if (chosen.empty()) {
      throw Error(name + ": " + table.path + " measures no " + std::string(spec::family_name(model.family)) +
                  " model of hidden size " + std::to_string(model.hidden) + " on " + device + " (" +
                  std::string(spec::family_name(model.family)) + " models measured there: " +
                  (family_models.empty() ? "none" : family_models) +
                  "); choose the table to use with --profile-model NAME or the cluster spec's "
                  "\"profile_model\" (its per-layer times are then scaled by FLOPs)");
    }
  }
  // Sequence closeness: |log(seq / wanted)|, the longer on ties; 0 wanted: the longest.
  auto seq_better = [&](std::int64_t a, std::int64_t b) {
    if (preference.seq > 0) {
      const double da = std::fabs(std::log(static_cast<double>(a) / preference.seq));
      const double db = std::fabs(std::log(static_cast<double>(b) / preference.seq));
      if (std::fabs(da - db) > 1e-12) return da < db;
    }
    return a > b;
  };
  const LatencyEntry* best = nullptr;
  for (const LatencyEntry* e : candidates) {
    if (e->model == chosen && (!best || seq_better(e->seq, best->seq))) best = e;
  }

  MeasuredLayerTiming m;
  m.model = best->model;
  m.chosen_because = because;
  m.seq = best->seq;
  m.shortest_seq = best->seq;
  for (const LatencyEntry* e : candidates) {
    if (e->model == best->model) m.shortest_seq = std::min(m.shortest_seq, e->seq);
  }
  m.dtype = dtype;
  m.forward = entry_curve(best->forward_ms, best->forward_slope_ms, best->forward_intercept_ms);
  m.backward = entry_curve(best->backward_ms, best->backward_slope_ms, best->backward_intercept_ms);
  m.fit = best->forward_ms.size() >= 2 && best->backward_ms.size() >= 2
              ? "curves fitted to micro-batch sizes 1.." + std::to_string(std::min(best->forward_ms.size(), best->backward_ms.size()))
              : "the table's straight-line fit";
  const double seq = static_cast<double>(best->seq);
  std::string flops_source;
  if (has_stats(best->model)) {
    const nlohmann::json& s = (*stats)[best->model];
    m.reference_flops = 2.0 * seq * s["parameters_per_layer"].get<double>() +
                        2.0 * s["hidden_size"].get<double>() * seq * seq;
  } else {
    m.reference_flops = model.layer_forward_flops(best->seq);
    flops_source = "; layer FLOPs from the planned model's shape";
  }
  DeviceProfile d;
  d.name = name;
  d.source = table.path + ": " + m.model + " (" + because + ") on " + device + ", seq " +
             std::to_string(m.seq) + ", " + dtype + ", per-layer latencies fitted in micro-batch size" +
             flops_source;
  d.measured = m;
  return d;
}

}  // namespace plait::sim
