#include "plait/runtime/profile_json.h"

#include "plait/core/json_fields.h"

namespace plait::runtime {
namespace {

nlohmann::json times_json(const std::vector<UnitTimes>& times) {
  nlohmann::json list = nlohmann::json::array();
  for (const UnitTimes& t : times) {
    list.push_back({{"forward_ms", t.forward * 1e3},
                    {"backward_input_ms", t.backward_input * 1e3},
                    {"backward_weight_ms", t.backward_weight * 1e3}});
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
                t.number("backward_weight_ms") * 1e-3};
    if (!(u.forward >= 0 && u.backward_input >= 0 && u.backward_weight >= 0)) {
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

std::string profile_model_name(const model::GPTConfig& m) {
  return "plait_l" + std::to_string(m.layers) + "_h" + std::to_string(m.hidden) + "_a" +
         std::to_string(m.heads) + "_v" + std::to_string(m.vocab);
}

std::vector<sim::LatencyEntry> latency_entries(const BatchProfile& p, const std::string& model,
                                               const std::string& device) {
  return {entry(p.layer, model, device, "float32", p.seq),
          entry(p.embedding, model, device, "float32+embedding", p.seq),
          entry(p.head, model, device, "float32+head", p.seq)};
}

nlohmann::json to_json(const SegmentProfile& p, int threads) {
  nlohmann::json segments = nlohmann::json::array();
  for (const model::Segment& s : p.segments) segments.push_back({{"start", s.start}, {"length", s.length}});
  return {{"model",
           {{"layers", p.model.layers},
            {"hidden", p.model.hidden},
            {"heads", p.model.heads},
            {"vocab", p.model.vocab},
            {"max_seq", p.model.max_seq},
            {"tie_embeddings", p.model.tie_embeddings}}},
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
  p.model = model::parse_gpt_config(top.object("model"));
  p.microbatch_size = static_cast<int>(top.integer_in("microbatch_size", 1, 1 << 20));
  top.integer_in("threads", 1, 1 << 12, 1);
  const nlohmann::json& segments = top.raw("segments");
  if (!segments.is_array() || segments.empty()) top.fail("segments", "expected a list of {start, length}");
  int next = 0;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const JsonFields s(segments[i], path, top.field_path("segments[" + std::to_string(i) + "]"));
    model::Segment seg{static_cast<int>(i), static_cast<int>(s.integer_in("start", 0, 1 << 24)),
                       static_cast<int>(s.integer_in("length", 1, 1 << 24))};
    if (seg.start != next) {
      top.fail("segments[" + std::to_string(i) + "]", "expected contiguous segments from position 0");
    }
    next = seg.end();
    s.check_no_unknown_fields();
    p.segments.push_back(seg);
  }
  p.layer = read_times(top, "layer", p.segments.size());
  p.embedding = read_times(top, "embedding", p.segments.size());
  p.head = read_times(top, "head", p.segments.size());
  top.check_no_unknown_fields();
  return p;
}

}  // namespace plait::runtime
