#include "plait/runtime/profile_json.h"

#include "plait/core/json_fields.h"
#include "plait/spec/model_spec_json.h"

namespace plait::runtime {
namespace {

nlohmann::json times_json(const std::vector<UnitTimes>& times) {
  nlohmann::json list = nlohmann::json::array();
  for (const UnitTimes& t : times) {
    list.push_back({{"forward_ms", t.forward * 1e3},
                    {"backward_input_ms", t.backward_input * 1e3},
                    {"backward_weight_ms", t.backward_weight * 1e3}});
    if (t.recompute > 0) list.back()["recompute_ms"] = t.recompute * 1e3;
  }
  return list;
}

std::vector<UnitTimes> read_times(const JsonFields& top, const std::string& key, std::size_t count) {
  const nlohmann::json& list = top.raw(key);
  if (!list.is_array() || list.size() != count) {
    top.fail(key, "expected one entry per segment (" + std::to_string(count) + ")");
  }
  std::vector<UnitTimes> times;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const JsonFields t(list[i], top.file(), top.field_path(key + "[" + std::to_string(i) + "]"));
    UnitTimes u{t.number("forward_ms") * 1e-3, t.number("backward_input_ms") * 1e-3,
                t.number("backward_weight_ms") * 1e-3, t.number("recompute_ms", 0.0) * 1e-3};
    if (!(u.forward >= 0 && u.backward_input >= 0 && u.backward_weight >= 0 && u.recompute >= 0)) {
      top.fail(key + "[" + std::to_string(i) + "]", "expected times >= 0");
    }
    t.check_no_unknown_fields();
    times.push_back(u);
  }
  return times;
}

// Zorse's least-squares line in the micro-batch size; when the times are too small for the
// batch dependence to show (the embedding: microseconds of noise) and the slope comes out <= 0,
// the line through the origin and the mean time per sample instead (slopes must be positive).
std::pair<double, double> positive_fit(const std::vector<double>& ms) {
  const auto fit = sim::fit_latency_line(ms);
  if (fit.first > 0) return fit;
  double per_sample = 0;
  for (std::size_t b = 0; b < ms.size(); ++b) per_sample += ms[b] / static_cast<double>(b + 1);
  return {std::max(per_sample / static_cast<double>(ms.size()), 1e-9), 0.0};
}

sim::LatencyEntry entry(const std::vector<UnitTimes>& times, const std::string& model,
                        const std::string& device, const std::string& dtype, int seq) {
  sim::LatencyEntry e;
  e.model = model;
  e.device = device;
  e.dtype = dtype;
  e.seq = seq;
  for (const UnitTimes& t : times) {
    e.forward_ms.push_back(t.forward * 1e3);
    e.backward_ms.push_back(t.backward() * 1e3);
  }
  std::tie(e.forward_slope_ms, e.forward_intercept_ms) = positive_fit(e.forward_ms);
  std::tie(e.backward_slope_ms, e.backward_intercept_ms) = positive_fit(e.backward_ms);
  return e;
}

}  // namespace

std::string profile_model_name(const spec::ModelSpec& m) {
  // GPT-2 shapes keep the names profiles had before LLaMA existed.
  const bool gpt2 = m.family == spec::Family::gpt2 && m.ffn_hidden == 4 * m.hidden;
  std::string name = gpt2 ? "plait" : "plait_" + std::string(spec::family_name(m.family));
  name += "_l" + std::to_string(m.layers) + "_h" + std::to_string(m.hidden) + "_a" + std::to_string(m.heads);
  if (m.kv_heads != m.heads) name += "_kv" + std::to_string(m.kv_heads);
  if (!gpt2) name += "_f" + std::to_string(m.ffn_hidden);
  return name + "_v" + std::to_string(m.vocab);
}

std::string latency_dtype(spec::Precision precision) {
  return precision == spec::Precision::bf16 ? "float16" : "float32";
}

std::vector<sim::LatencyEntry> latency_entries(const BatchProfile& p, const std::string& model,
                                               const std::string& device, spec::Precision precision) {
  const std::string dtype = latency_dtype(precision);
  return {entry(p.layer, model, device, dtype, p.seq),
          entry(p.embedding, model, device, dtype + "+embedding", p.seq),
          entry(p.head, model, device, dtype + "+head", p.seq)};
}

nlohmann::json to_json(const SegmentProfile& p, int threads) {
  nlohmann::json segments = nlohmann::json::array();
  for (int i = 0; i < p.partition.count(); ++i) {
    segments.push_back({{"start", p.partition.start(i)}, {"length", p.partition.lengths[static_cast<std::size_t>(i)]}});
  }
  return {{"model", spec::model_spec_json(p.model)},
          {"microbatch_size", p.microbatch_size},
          {"threads", threads},
          {"segments", segments},
          {"layer", times_json(p.layer)},
          {"embedding", times_json(p.embedding)},
          {"head", times_json(p.head)}};
}

SegmentProfile read_segment_profile(const std::string& path) {
  const nlohmann::json doc = read_json_file(path);
  const JsonFields top(doc, path);
  SegmentProfile p;
  p.model = spec::read_model_spec(top.object("model"));
  p.microbatch_size = static_cast<int>(top.integer_in("microbatch_size", 1, 1 << 20));
  top.integer_in("threads", 1, 1 << 12, 1);
  const nlohmann::json& segments = top.raw("segments");
  if (!segments.is_array() || segments.empty()) top.fail("segments", "expected a list of {start, length}");
  std::int64_t next = 0;
  std::vector<std::int64_t> lengths;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const JsonFields s(segments[i], path, top.field_path("segments[" + std::to_string(i) + "]"));
    if (s.integer_in("start", 0, 1 << 24) != next) {
      top.fail("segments[" + std::to_string(i) + "]", "expected contiguous segments from position 0");
    }
    lengths.push_back(s.integer_in("length", 1, 1 << 24));
    next += lengths.back();
    s.check_no_unknown_fields();
  }
  p.partition = spec::partition_from_lengths(p.model, lengths);
  const std::size_t k = lengths.size();
  p.layer = read_times(top, "layer", k);
  p.embedding = read_times(top, "embedding", k);
  p.head = read_times(top, "head", k);
  top.check_no_unknown_fields();
  return p;
}

}  // namespace plait::runtime
