#include "plait/schedule/parallel_spec.h"

#include <algorithm>

#include <cstdint>
#include <string>

#include "plait/core/error.h"
#include "plait/schedule/replicate.h"
#include "plait/schedule/schedule_family.h"
#include "plait/schedule/schedule_text.h"

namespace plait::schedule {
namespace {

constexpr int kMaxRanks = 1 << 16;

std::string indexed(const std::string& key, std::size_t i) {
  return key + "[" + std::to_string(i) + "]";
}

std::vector<DeviceEmulation> parse_devices(const JsonFields& p) {
  const nlohmann::json& list = p.raw("devices");
  if (!list.is_array()) p.fail("devices", "expected an array with one object per rank");
  std::vector<DeviceEmulation> devices;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string key = indexed("devices", i);
    if (!list[i].is_object()) p.fail(key, "expected an object {type, slowdown, memory_bytes}");
    const JsonFields d(list[i], p.file(), p.field_path(key));
    DeviceEmulation e;
    e.type = d.string("type", e.type);
    e.slowdown = d.number("slowdown", 1.0);
    if (!(e.slowdown >= 1.0 && e.slowdown <= 1000.0)) {
      d.fail("slowdown", "expected a slow-down factor in [1, 1000], found " +
                             std::to_string(e.slowdown));
    }
    if (d.has("memory_bytes")) {
      e.memory_bytes = static_cast<std::size_t>(d.integer_in("memory_bytes", 1, INT64_MAX));
    }
    if (d.has("host_memory_bytes")) {
      e.host_memory_bytes = static_cast<std::size_t>(d.integer_in("host_memory_bytes", 1, INT64_MAX));
    }
    if (d.has("host_bytes_per_second")) {
      const double bw = d.number("host_bytes_per_second", 0.0);
      if (!(bw >= 1e3 && bw <= 1e15)) {
        d.fail("host_bytes_per_second", "expected a device <-> host bandwidth in bytes per second in [1e3, 1e15], found " +
                                            std::to_string(bw));
      }
      e.host_bytes_per_second = bw;
    }
    d.check_no_unknown_fields();
    devices.push_back(std::move(e));
  }
  return devices;
}

std::vector<int> parse_layers(const JsonFields& p) {
  std::vector<int> layers;
  for (std::int64_t n : p.integers("layers")) {
    if (n < 0 || n > (1 << 20)) {
      p.fail("layers", "expected layer counts >= 0, found " + std::to_string(n));
    }
    layers.push_back(static_cast<int>(n));
  }
  if (layers.empty()) p.fail("layers", "expected one layer count per virtual stage");
  return layers;
}

void parse_split(const JsonFields& p, ParallelSpec& c) {
  c.split = p.string("split", "");
  if (!c.split.empty() && c.split != "even" && c.split != "flops") {
    p.fail("split", "expected \"even\" or \"flops\", found \"" + c.split + "\"");
  }
}

void parse_generated(const JsonFields& p, ParallelSpec& c) {
  c.form = ParallelSpec::Form::generated;
  c.schedule = p.string("schedule", c.schedule);
  if (find_schedule_family(c.schedule) == nullptr) {
    p.fail("schedule", "unknown schedule '" + c.schedule + "'; expected one of " + schedule_family_names());
  }
  c.pp = static_cast<int>(p.integer_in("pp", 1, kMaxRanks, 1));
  c.dp = static_cast<int>(p.integer_in("dp", 1, kMaxRanks, 1));
  if (static_cast<std::int64_t>(c.pp) * c.dp > kMaxRanks) {
    p.fail("dp", "pp * dp = " + std::to_string(std::int64_t{c.pp} * c.dp) + " ranks is more than " +
                     std::to_string(kMaxRanks));
  }
  c.chunks = static_cast<int>(p.integer_in("chunks", 1, 64, 0));
  if (p.has("layers")) c.layers = parse_layers(p);
  parse_split(p, c);
}

void parse_explicit(const JsonFields& p, ParallelSpec& c) {
  c.form = ParallelSpec::Form::explicit_layout;
  for (const char* generated_only : {"schedule", "pp", "dp", "chunks"}) {
    if (p.has(generated_only)) {
      p.fail(generated_only, "belongs to the generated form; the explicit form (rank_vstages, "
                             "schedule_text) gives the layout and schedule itself");
    }
  }
  if (!p.has("rank_vstages")) p.fail("rank_vstages", "required with schedule_text");
  if (!p.has("schedule_text")) p.fail("schedule_text", "required with rank_vstages");
  if (!p.has("layers")) p.fail("layers", "required in the explicit form (layers per virtual stage)");
  c.layers = parse_layers(p);
  const nlohmann::json& ranks = p.raw("rank_vstages");
  if (!ranks.is_array() || ranks.empty()) {
    p.fail("rank_vstages", "expected an array with one list of virtual stages per rank");
  }
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const std::string key = indexed("rank_vstages", r);
    if (!ranks[r].is_array() || ranks[r].empty()) {
      p.fail(key, "expected a non-empty list of virtual stages");
    }
    std::vector<int> stages;
    for (const nlohmann::json& s : ranks[r]) {
      if (!s.is_number_integer() || s.get<std::int64_t>() < 0 ||
          s.get<std::int64_t>() >= static_cast<std::int64_t>(c.layers.size())) {
        p.fail(key, "expected virtual stages in [0, " + std::to_string(c.layers.size()) +
                        ") (one per entry of layers), found " + s.dump());
      }
      stages.push_back(s.get<int>());
    }
    c.rank_vstages.push_back(std::move(stages));
  }
  c.schedule_text = p.strings("schedule_text");
  if (c.schedule_text.size() != c.rank_vstages.size()) {
    p.fail("schedule_text", "expected one string per rank (" + std::to_string(c.rank_vstages.size()) +
                                " in rank_vstages), found " + std::to_string(c.schedule_text.size()));
  }
  c.schedule_name = p.string("schedule_name", "explicit");
  // A count of segments is cut by it here too: a plan for packed documents runs the flops split
  // cut per micro-batch from its documents (runtime/microbatch_partition.h), which explicit
  // lengths would fix.
  parse_split(p, c);
}

// One value for every virtual stage, or a list with one per stage: `read` checks and converts
// each (failing with `what` on the field `key`).
template <typename T, typename Read>
void per_stage_values(const JsonFields& p, const std::string& key, const std::string& what, Read read,
                      std::vector<T>& out) {
  if (!p.has(key)) return;
  const nlohmann::json& v = p.raw(key);
  const auto one = [&](const nlohmann::json& x) -> T {
    const std::optional<T> value = read(x);
    if (!value) p.fail(key, "expected " + what + " (or a list with one per virtual stage), found " + x.dump());
    return *value;
  };
  if (!v.is_array()) {
    out.push_back(one(v));
    return;
  }
  if (v.empty()) p.fail(key, "expected one value per virtual stage, found an empty list");
  for (const nlohmann::json& x : v) out.push_back(one(x));
}

// An "offload" value: true / false (the optimizer state, as before the levels) or a level name.
struct OffloadLevel {
  bool optimizer = false, activations = false;
};
std::optional<OffloadLevel> parse_offload_level(const nlohmann::json& x) {
  if (x.is_boolean()) return OffloadLevel{x.get<bool>(), false};
  if (!x.is_string()) return std::nullopt;
  const std::string s = x.get<std::string>();
  if (s == "none") return OffloadLevel{false, false};
  if (s == "optimizer") return OffloadLevel{true, false};
  if (s == "activations") return OffloadLevel{false, true};
  if (s == "all") return OffloadLevel{true, true};
  return std::nullopt;
}

// "shard": 2 or [0, 1, 2, 3]; "offload": true, "activations" or [false, "all"]; "shard_shares":
// "equal" | "memory".
void parse_sharding(const JsonFields& p, ParallelSpec& c) {
  per_stage_values<int>(p, "shard", "a ZeRO level 0, 1, 2 or 3", [](const nlohmann::json& x) -> std::optional<int> {
    if (!x.is_number_integer() || x.get<std::int64_t>() < 0 || x.get<std::int64_t>() > 3) return std::nullopt;
    return x.get<int>();
  }, c.shard);
  std::vector<OffloadLevel> offload;
  per_stage_values<OffloadLevel>(p, "offload",
                                 "true, false, \"none\", \"optimizer\", \"activations\" or \"all\"",
                                 parse_offload_level, offload);
  for (const OffloadLevel& o : offload) {
    c.offload.push_back(o.optimizer);
    c.offload_activations.push_back(o.activations);
  }
  // Tensor parallelism (spec/tensor_parallel_plan.h): the simulator, the planner and the runtime
  // read it (the runtime's checks of the degrees against the layout: runtime/pipeline_plan.cpp).
  per_stage_values<int>(p, "tp", "a tensor-parallel degree >= 1", [](const nlohmann::json& x) -> std::optional<int> {
    if (!x.is_number_integer() || x.get<std::int64_t>() < 1 || x.get<std::int64_t>() > 1024) return std::nullopt;
    return x.get<int>();
  }, c.tp);
  const std::string shares = p.string("shard_shares", "equal");
  if (shares != "equal" && shares != "memory") {
    p.fail("shard_shares", "expected \"equal\" or \"memory\" (shards proportional to the devices' memory_bytes), found \"" +
                               shares + "\"");
  }
  c.shard_shares = shares == "memory" ? ParallelSpec::Shares::memory : ParallelSpec::Shares::equal;
}

Schedule generated_schedule(const ParallelSpec& spec, int microbatches, int segments, const std::string& file) {
  const ScheduleFamily* family = find_schedule_family(spec.schedule);
  if (family == nullptr) {
    throw InputError(file, "parallel.schedule",
                     "unknown schedule '" + spec.schedule + "'; expected one of " + schedule_family_names());
  }
  PipelineShape shape;
  shape.stages = spec.pp;
  shape.chunks = spec.chunks > 0 ? spec.chunks : (family->fixed_chunks > 0 ? family->fixed_chunks : 2);
  shape.microbatches = microbatches;
  shape.segments = segments;
  if (const std::string reason = unsupported_reason(*family, shape); !reason.empty()) {
    throw InputError(file, "parallel.schedule", reason);
  }
  return replicate(generate_schedule(*family, shape), spec.dp);
}

Schedule explicit_schedule(const ParallelSpec& spec, int microbatches, int segments, const std::string& file) {
  Schedule s;
  s.layout.rank_vstages.reserve(spec.rank_vstages.size());
  for (const auto& stages : spec.rank_vstages) s.layout.rank_vstages.emplace_back(stages.begin(), stages.end());
  s.layout.num_vstages = static_cast<std::int32_t>(spec.layers.size());
  s.layout.num_microbatches = microbatches;
  s.layout.num_segments = segments;
  try {
    check_layout(s.layout);
  } catch (const Error& e) {
    throw InputError(file, "parallel.rank_vstages", e.what());
  }
  for (std::size_t r = 0; r < spec.schedule_text.size(); ++r) {
    const std::string& text = spec.schedule_text[r];
    const std::string field = "parallel." + indexed("schedule_text", r);
    if (text.find_first_not_of(" \t") == std::string::npos || text == "-") {
      s.ranks.emplace_back();
      continue;
    }
    if (text.find('\n') != std::string::npos) {
      throw InputError(file, field,
                       "expected one line of actions for rank " + std::to_string(r) + " (no newlines)");
    }
    // The text form of one rank (docs/schedules.md); errors name line and column in the string.
    Schedule one = parse_schedule(text, file + ": " + field);
    s.ranks.push_back(std::move(one.ranks.front()));
  }
  return s;
}

}  // namespace

spec::Recompute parse_recompute(const nlohmann::json& v, const std::string& file, const std::string& field) {
  constexpr std::int64_t kMaxLayers = 1 << 20;
  const auto count = [&](const nlohmann::json& n) -> int {
    if (!n.is_number_integer() || n.get<std::int64_t>() < 0 || n.get<std::int64_t>() > kMaxLayers) {
      throw InputError(file, field, "expected layer counts >= 0, found " + n.dump());
    }
    return n.get<int>();
  };
  if (v.is_string() && v.get<std::string>() == "none") return {};
  if (v.is_string() && v.get<std::string>() == "full") return spec::Recompute::full();
  if (v.is_number_integer()) return spec::Recompute::layers_each(count(v));
  if (v.is_array() && !v.empty()) {
    std::vector<int> counts;
    for (const nlohmann::json& n : v) counts.push_back(count(n));
    return spec::Recompute::stages(std::move(counts));
  }
  throw InputError(file, field,
                   "expected \"none\", \"full\", a number of layers per stage or a list of one count "
                   "per virtual stage, found " + v.dump());
}

nlohmann::json to_json(const spec::Recompute& r) {
  switch (r.form) {
    case spec::Recompute::Form::none: return "none";
    case spec::Recompute::Form::full: return "full";
    case spec::Recompute::Form::each: return r.each;
    case spec::Recompute::Form::per_stage: return r.per_stage;
  }
  return "none";
}

int ParallelSpec::shard_level(int vstage) const {
  if (shard.empty()) return 0;
  return shard.size() == 1 ? shard.front() : shard.at(static_cast<std::size_t>(vstage));
}

bool ParallelSpec::offloaded(int vstage) const {
  if (offload.empty()) return false;
  return offload.size() == 1 ? offload.front() : offload.at(static_cast<std::size_t>(vstage));
}

bool ParallelSpec::activations_offloaded(int vstage) const {
  if (offload_activations.empty()) return false;
  return offload_activations.size() == 1 ? offload_activations.front()
                                         : offload_activations.at(static_cast<std::size_t>(vstage));
}

void check_data_parallel(const ParallelSpec& spec, const Layout& layout, const std::string& file) {
  const int V = layout.num_vstages;
  const auto per_stage = [&](const char* field, std::size_t n, const char* what) {
    if (n > 1 && n != static_cast<std::size_t>(V)) {
      throw InputError(file, std::string("parallel.") + field,
                       "expected one " + std::string(what) + " per virtual stage (" + std::to_string(V) + "), found " +
                           std::to_string(n));
    }
  };
  per_stage("shard", spec.shard.size(), "shard level");
  per_stage("offload", spec.offload.size(), "offload flag");
  per_stage("offload", spec.offload_activations.size(), "offload level");
  std::vector<std::vector<int>> holders(static_cast<std::size_t>(V));
  for (std::size_t r = 0; r < layout.rank_vstages.size(); ++r) {
    for (std::int32_t v : layout.rank_vstages[r]) holders[static_cast<std::size_t>(v)].push_back(static_cast<int>(r));
  }
  const auto device_field = [&](int rank, const char* field) {
    return "parallel.devices[" + std::to_string(rank) + "]." + field;
  };
  for (int v = 0; v < V; ++v) {
    const auto& h = holders[static_cast<std::size_t>(v)];
    const int level = spec.shard_level(v);
    if (level > 0 && h.size() < 2) {
      throw InputError(file, "parallel.shard",
                       "virtual stage " + std::to_string(v) + " is held by one rank, so there is no data-parallel group to "
                       "shard it over (level " + std::to_string(level) + "); give it 0" +
                           (spec.shard.size() == 1 ? " (a list with one level per virtual stage)" : ""));
    }
    if (spec.offloaded(v) || spec.activations_offloaded(v)) {
      for (int r : h) {
        if (spec.devices.empty() || !spec.devices[static_cast<std::size_t>(r)].host_memory_bytes) {
          throw InputError(file, spec.devices.empty() ? "parallel.offload" : device_field(r, "host_memory_bytes"),
                           "virtual stage " + std::to_string(v) +
                               (spec.offloaded(v) ? " is offloaded" : " offloads its activations") + " but rank " +
                               std::to_string(r) + " has no host memory tier; give its device a host_memory_bytes capacity");
        }
      }
    }
    if (level > 0 && spec.shard_shares == ParallelSpec::Shares::memory) {
      for (int r : h) {
        if (spec.devices.empty() || !spec.devices[static_cast<std::size_t>(r)].memory_bytes) {
          throw InputError(file, spec.devices.empty() ? "parallel.shard_shares" : device_field(r, "memory_bytes"),
                           "shards proportional to memory need every holder's memory_bytes; rank " + std::to_string(r) +
                               " (virtual stage " + std::to_string(v) + ") has none");
        }
      }
    }
  }
}

int ParallelSpec::tensor_parallel(int vstage) const {
  if (tp.empty()) return 1;
  return tp.size() == 1 ? tp.front() : tp.at(static_cast<std::size_t>(vstage));
}

int ParallelSpec::max_tensor_parallel() const {
  int most = 1;
  for (int t : tp) most = std::max(most, t);
  return most;
}

int ParallelSpec::world_size() const {
  return form == Form::generated ? pp * dp : static_cast<int>(rank_vstages.size());
}

ParallelSpec parse_parallel_spec(const JsonFields& p) {
  ParallelSpec c;
  if (p.has("rank_vstages") || p.has("schedule_text")) {
    parse_explicit(p, c);
  } else {
    parse_generated(p, c);
  }
  if (p.has("recompute")) c.recompute = parse_recompute(p.raw("recompute"), p.file(), p.field_path("recompute"));
  parse_sharding(p, c);
  if (p.has("devices")) {
    c.devices = parse_devices(p);
    if (static_cast<int>(c.devices.size()) != c.world_size()) {
      p.fail("devices", "expected one device per rank (" + std::to_string(c.world_size()) + "), found " +
                            std::to_string(c.devices.size()));
    }
  }
  if (p.has("cluster_devices")) {
    c.cluster_devices = p.strings("cluster_devices");
    if (static_cast<int>(c.cluster_devices.size()) != c.world_size()) {
      p.fail("cluster_devices", "expected one cluster device per rank (" + std::to_string(c.world_size()) +
                                    "), found " + std::to_string(c.cluster_devices.size()));
    }
  }
  p.check_no_unknown_fields();
  return c;
}

nlohmann::json to_json(const ParallelSpec& c) {
  nlohmann::json j;
  if (c.form == ParallelSpec::Form::generated) {
    j["schedule"] = c.schedule;
    j["pp"] = c.pp;
    j["dp"] = c.dp;
    if (c.chunks > 0) j["chunks"] = c.chunks;
    if (!c.split.empty()) j["split"] = c.split;
    if (!c.layers.empty()) j["layers"] = c.layers;
  } else {
    j["rank_vstages"] = c.rank_vstages;
    j["layers"] = c.layers;
    j["schedule_text"] = c.schedule_text;
    j["schedule_name"] = c.schedule_name;
    if (!c.split.empty()) j["split"] = c.split;
  }
  if (c.recompute.form != spec::Recompute::Form::none) j["recompute"] = to_json(c.recompute);
  const auto one_or_list = [](const auto& values) {
    nlohmann::json v = values.size() == 1 ? nlohmann::json(values.front()) : nlohmann::json::array();
    if (values.size() != 1) {
      for (const auto x : values) v.push_back(x);
    }
    return v;
  };
  if (!c.shard.empty()) j["shard"] = one_or_list(c.shard);
  const bool any_activations =
      std::find(c.offload_activations.begin(), c.offload_activations.end(), true) != c.offload_activations.end();
  if (any_activations) {
    // The level names (true/false cannot say "activations").
    std::vector<std::string> levels;
    const std::size_t n = std::max(c.offload.size(), c.offload_activations.size());
    for (std::size_t v = 0; v < n; ++v) {
      const bool o = n == 1 ? c.offloaded(0) : c.offloaded(static_cast<int>(v));
      const bool a = n == 1 ? c.activations_offloaded(0) : c.activations_offloaded(static_cast<int>(v));
      levels.push_back(o && a ? "all" : o ? "optimizer" : a ? "activations" : "none");
    }
    j["offload"] = one_or_list(levels);
  } else if (!c.offload.empty()) {
    j["offload"] = one_or_list(c.offload);
  }
  if (!c.tp.empty()) j["tp"] = one_or_list(c.tp);
  if (c.shard_shares == ParallelSpec::Shares::memory) j["shard_shares"] = "memory";
  if (!c.devices.empty()) {
    nlohmann::json devices = nlohmann::json::array();
    for (const DeviceEmulation& d : c.devices) {
      nlohmann::json e = {{"type", d.type}, {"slowdown", d.slowdown}};
      if (d.memory_bytes) e["memory_bytes"] = *d.memory_bytes;
      if (d.host_memory_bytes) e["host_memory_bytes"] = *d.host_memory_bytes;
      if (d.host_bytes_per_second) e["host_bytes_per_second"] = *d.host_bytes_per_second;
      devices.push_back(std::move(e));
    }
    j["devices"] = std::move(devices);
  }
  if (!c.cluster_devices.empty()) j["cluster_devices"] = c.cluster_devices;
  return j;
}

ParallelSpec explicit_parallel_spec(const Schedule& schedule, std::vector<int> layers, std::string name) {
  ParallelSpec spec;
  spec.form = ParallelSpec::Form::explicit_layout;
  const Layout& layout = schedule.layout;
  for (const auto& stages : layout.rank_vstages) spec.rank_vstages.emplace_back(stages.begin(), stages.end());
  const bool with_chunk = layout.max_chunks() > 1;
  for (const std::vector<Action>& actions : schedule.ranks) {
    std::string line;
    for (const Action& a : actions) {
      if (!line.empty()) line += ' ';
      append_action(line, a, with_chunk);
    }
    spec.schedule_text.push_back(line.empty() ? "-" : line);
  }
  spec.layers = std::move(layers);
  spec.schedule_name = std::move(name);
  return spec;
}

Schedule parallel_schedule(const ParallelSpec& spec, int microbatches, int segments, const std::string& file) {
  return spec.form == ParallelSpec::Form::generated ? generated_schedule(spec, microbatches, segments, file)
                                                    : explicit_schedule(spec, microbatches, segments, file);
}

}  // namespace plait::schedule
