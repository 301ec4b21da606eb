#include "plait/runtime/parallel_config.h"

#include <string>

#include "plait/schedule/schedule_family.h"
#include "plait/schedule/sequence_partition.h"

namespace plait::runtime {
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

void parse_generated(const JsonFields& p, ParallelConfig& c) {
  c.form = ParallelConfig::Form::generated;
  c.schedule = p.string("schedule", c.schedule);
  if (schedule::find_schedule_family(c.schedule) == nullptr) {
    p.fail("schedule", "unknown schedule '" + c.schedule + "'; expected one of " +
                           schedule::schedule_family_names());
  }
  c.pp = static_cast<int>(p.integer_in("pp", 1, kMaxRanks, 1));
  c.dp = static_cast<int>(p.integer_in("dp", 1, kMaxRanks, 1));
  if (static_cast<std::int64_t>(c.pp) * c.dp > kMaxRanks) {
    p.fail("dp", "pp * dp = " + std::to_string(std::int64_t{c.pp} * c.dp) + " ranks is more than " +
                     std::to_string(kMaxRanks));
  }
  c.chunks = static_cast<int>(p.integer_in("chunks", 1, 64, 0));
  if (p.has("layers")) c.layers = parse_layers(p);
  c.split = p.string("split", "");
  if (!c.split.empty() && c.split != "even" && c.split != "flops") {
    p.fail("split", "expected \"even\" or \"flops\", found \"" + c.split + "\"");
  }
}

void parse_explicit(const JsonFields& p, ParallelConfig& c) {
  c.form = ParallelConfig::Form::explicit_layout;
  for (const char* generated_only : {"schedule", "pp", "dp", "chunks", "split"}) {
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
    p.fail("schedule_text", "expected one string per rank (" +
                                std::to_string(c.rank_vstages.size()) + " in rank_vstages), found " +
                                std::to_string(c.schedule_text.size()));
  }
  c.schedule_name = p.string("schedule_name", "explicit");
}

}  // namespace

int ParallelConfig::world_size() const {
  return form == Form::generated ? pp * dp : static_cast<int>(rank_vstages.size());
}

ParallelConfig parse_parallel_config(const JsonFields& p) {
  ParallelConfig c;
  if (p.has("rank_vstages") || p.has("schedule_text")) {
    parse_explicit(p, c);
  } else {
    parse_generated(p, c);
  }
  if (p.has("devices")) {
    c.devices = parse_devices(p);
    if (static_cast<int>(c.devices.size()) != c.world_size()) {
      p.fail("devices", "expected one device per rank (" + std::to_string(c.world_size()) +
                            "), found " + std::to_string(c.devices.size()));
    }
  }
  p.check_no_unknown_fields();
  return c;
}

int JobConfig::global_microbatches() const {
  return parallel.form == ParallelConfig::Form::generated ? parallel.dp * run.train.microbatches
                                                          : run.train.microbatches;
}

TrainConfig JobConfig::global_train() const {
  TrainConfig t = run.train;
  t.microbatches = global_microbatches();
  const int k = static_cast<int>(t.segments().size());
  if (parallel.split == "flops" && k > 1) {
    const schedule::ModelShape shape{run.model.layers, run.model.hidden, run.model.heads,
                                     run.model.vocab, run.model.max_seq};
    const schedule::SequencePartition partition = schedule::flops_partition(shape, t.seq, k);
    t.segment_lengths.assign(partition.lengths.begin(), partition.lengths.end());
  }
  return t;
}

JobConfig parse_job_config(const nlohmann::json& document, const std::string& file) {
  JobConfig job;
  if (!document.is_object()) {
    throw InputError(file, "(top level)", "expected an object with sections model, train, data, parallel");
  }
  // The model/train/data sections are train_config's; "parallel" is read here.
  nlohmann::json rest = document;
  rest.erase("parallel");
  job.run = parse_run_config(rest, file);
  if (document.contains("parallel")) {
    const JsonFields top(document, file);
    job.parallel = parse_parallel_config(top.object("parallel"));
  }
  const nlohmann::json& train = document.at("train");
  job.segments_from_count = train.contains("segments") && train.at("segments").is_number();
  if (!job.parallel.split.empty() && train.contains("segments") && !job.segments_from_count) {
    throw InputError(file, "parallel.split",
                     "applies when train.segments is a count; train.segments gives the lengths");
  }
  return job;
}

JobConfig load_job_config(const std::string& path) {
  return parse_job_config(read_json_file(path), path);
}

JobConfig job_from_run_config(RunConfig run) {
  JobConfig job;
  job.run = std::move(run);
  return job;
}

nlohmann::json to_json(const ParallelConfig& c) {
  nlohmann::json j;
  if (c.form == ParallelConfig::Form::generated) {
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
  }
  if (!c.devices.empty()) {
    nlohmann::json devices = nlohmann::json::array();
    for (const DeviceEmulation& d : c.devices) {
      nlohmann::json e = {{"type", d.type}, {"slowdown", d.slowdown}};
      if (d.memory_bytes) e["memory_bytes"] = *d.memory_bytes;
      devices.push_back(std::move(e));
    }
    j["devices"] = std::move(devices);
  }
  return j;
}

}  // namespace plait::runtime
