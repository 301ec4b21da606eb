#include "plait/plan/plan_file.h"

#include <algorithm>
#include <fstream>
#include <map>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/schedule/replicate.h"
#include "plait/schedule/schedule_family.h"
#include "plait/schedule/validator.h"
#include "plait/sim/stage_layers.h"

namespace plait::plan {

namespace {

// One rank's actions in the text form ("F0.0 F0.1 BW0.1 ..."; "-" for none).
std::string rank_text(const std::vector<schedule::Action>& actions, bool with_chunk) {
  std::string out;
  for (const schedule::Action& a : actions) {
    if (!out.empty()) out += ' ';
    schedule::append_action(out, a, with_chunk);
  }
  return out.empty() ? "-" : out;
}

}  // namespace

nlohmann::json plan_file_json(const PlanningProblem& problem, const Plan& plan, const nlohmann::json* base) {
  const schedule::ModelShape& shape = problem.model.shape;
  const PlanChoice& choice = plan.choice;
  nlohmann::json doc = nlohmann::json::object();
  doc["model"] = {{"layers", shape.layers},   {"hidden", shape.hidden},   {"heads", shape.heads},
                  {"vocab", shape.vocab},     {"max_seq", shape.max_seq}, {"tie_embeddings", problem.model.tie_embeddings}};
  nlohmann::json train = nlohmann::json::object();
  if (base && base->contains("train")) train = (*base)["train"];
  if (!train.contains("steps")) train["steps"] = 10;
  train["seq"] = problem.seq;
  train["microbatch_size"] = choice.microbatch_size;
  train["microbatches"] = choice.num_microbatches;
  if (choice.segments > 1) {
    train["segments"] = schedule::partition_sequence(shape, problem.seq, choice.segments, choice.split).lengths;
  } else {
    train["segments"] = 1;
  }
  doc["train"] = train;
  if (base && base->contains("data")) doc["data"] = (*base)["data"];

  const schedule::Layout& layout = plan.schedule.layout;
  nlohmann::json parallel = nlohmann::json::object();
  parallel["rank_vstages"] = layout.rank_vstages;
  parallel["layers"] = choice.vstage_layers;
  nlohmann::json text = nlohmann::json::array();
  for (const auto& actions : plan.schedule.ranks) text.push_back(rank_text(actions, layout.max_chunks() > 1));
  parallel["schedule_text"] = text;
  parallel["schedule_name"] = choice.family;
  if (problem.cluster.emulated) {
    nlohmann::json devices = nlohmann::json::array();
    for (int d : choice.rank_devices()) {
      const DeviceType& t = problem.cluster.type_of(d);
      devices.push_back({{"type", t.name},
                         {"slowdown", t.slowdown},
                         {"memory_bytes", static_cast<std::int64_t>(t.memory_bytes)}});
    }
    parallel["devices"] = devices;
  }
  doc["parallel"] = parallel;
  return doc;
}

void write_plan_file(const std::string& path, const nlohmann::json& document) {
  std::ofstream out(path);
  if (!out) throw Error(path + ": cannot open the plan file for writing");
  out << document.dump(2) << '\n';
  if (!out) throw Error(path + ": writing the plan file failed");
}

LoadedPlan read_plan_file(const std::string& path, const ClusterSpec& cluster) {
  const nlohmann::json doc = read_json_file(path);
  const JsonFields top(doc, path);
  const JsonFields train = top.object("train");
  top.raw("model");  // read by sim::resolve_model below
  if (top.has("data")) top.raw("data");  // the runtime's
  LoadedPlan out;
  out.seq = train.integer_in("seq", 1, 1 << 24);
  out.model = sim::resolve_model(path, out.seq);
  const schedule::ModelShape& shape = out.model.shape;
  const int b = static_cast<int>(train.integer_in("microbatch_size", 1, 1 << 16));
  const int m = static_cast<int>(train.integer_in("microbatches", 1, 1 << 24, 1));
  std::vector<std::int64_t> lengths;
  if (train.has("segments") && train.raw("segments").is_array()) {
    lengths = train.integers("segments");
    std::int64_t sum = 0;
    for (std::int64_t len : lengths) {
      if (len < 1) train.fail("segments", "segment lengths must be >= 1");
      sum += len;
    }
    if (sum != out.seq) {
      train.fail("segments", "segment lengths sum to " + std::to_string(sum) + ", expected train.seq " +
                                 std::to_string(out.seq));
    }
  } else {
    // A count: plait's engine cuts evenly with the remainder on the first segment.
    const int k = static_cast<int>(train.integer_in("segments", 1, out.seq, 1));
    lengths.assign(k, out.seq / k);
    lengths[0] += out.seq % k;
  }
  const int k = static_cast<int>(lengths.size());

  const JsonFields par = top.object("parallel");
  PlanChoice& choice = out.choice;
  choice.microbatch_size = b;
  choice.segments = k;
  schedule::Schedule& s = out.schedule;
  if (par.has("rank_vstages")) {
    const nlohmann::json& rv = par.raw("rank_vstages");
    if (!rv.is_array() || rv.empty()) par.fail("rank_vstages", "expected a non-empty array of arrays of virtual stages");
    for (std::size_t r = 0; r < rv.size(); ++r) {
      const std::string field = "rank_vstages[" + std::to_string(r) + "]";
      if (!rv[r].is_array() || rv[r].empty()) par.fail(field, "expected at least one virtual stage");
      std::vector<std::int32_t> stages;
      for (const auto& x : rv[r]) {
        if (!x.is_number_integer() || x.get<std::int64_t>() < 0) par.fail(field, "expected virtual stage numbers >= 0");
        stages.push_back(static_cast<std::int32_t>(x.get<std::int64_t>()));
      }
      s.layout.rank_vstages.push_back(std::move(stages));
    }
    for (std::int64_t l : par.integers("layers")) choice.vstage_layers.push_back(static_cast<int>(l));
    const std::vector<std::string> text = par.strings("schedule_text");
    choice.family = par.string("schedule_name", "custom");
    if (par.has("devices")) {
      const nlohmann::json& devices = par.raw("devices");
      if (!devices.is_array()) par.fail("devices", "expected an array of {type, slowdown, memory_bytes}");
      for (std::size_t i = 0; i < devices.size(); ++i) {
        const JsonFields d(devices[i], path, par.field_path("devices") + "[" + std::to_string(i) + "]");
        d.string("type", "");
        if (d.has("slowdown") && !(d.number("slowdown") >= 1.0)) d.fail("slowdown", "expected a slow-down >= 1");
        d.integer_in("memory_bytes", 1, INT64_MAX, 1);
        d.check_no_unknown_fields();
      }
    }
    par.check_no_unknown_fields();
    s.layout.num_vstages = static_cast<std::int32_t>(choice.vstage_layers.size());
    s.layout.num_microbatches = m;
    s.layout.num_segments = k;
    try {
      schedule::check_layout(s.layout);
    } catch (const InputError&) {
      throw;
    } catch (const Error& e) {
      par.fail("rank_vstages", e.what());
    }
    if (text.size() != s.layout.rank_vstages.size()) {
      par.fail("schedule_text", "expected one line per rank (" + std::to_string(s.layout.rank_vstages.size()) +
                                    "), found " + std::to_string(text.size()));
    }
    for (std::size_t r = 0; r < text.size(); ++r) {
      std::vector<schedule::Action> actions;
      std::size_t pos = 0;
      const std::string& line = text[r];
      while (pos < line.size()) {
        const std::size_t end = std::min(line.find(' ', pos), line.size());
        const std::string token = line.substr(pos, end - pos);
        pos = end + 1;
        if (token.empty() || token == "-") continue;
        schedule::Action a;
        std::string error;
        std::size_t offset = 0;
        if (!schedule::parse_action(token, a, error, offset)) {
          par.fail("schedule_text[" + std::to_string(r) + "]", "'" + token + "': " + error);
        }
        actions.push_back(a);
      }
      s.ranks.push_back(std::move(actions));
    }
  } else {
    const std::string family = par.string("schedule", "seq1f1b");
    const schedule::ScheduleFamily* f = schedule::find_schedule_family(family);
    if (!f) par.fail("schedule", "unknown schedule '" + family + "'; expected one of " + schedule::schedule_family_names());
    const int pp = static_cast<int>(par.integer_in("pp", 1, 1 << 16, 1));
    const int dp = static_cast<int>(par.integer_in("dp", 1, 1 << 16, 1));
    const int chunks = static_cast<int>(par.integer_in("chunks", 1, 64, f->fixed_chunks > 0 ? f->fixed_chunks : 2));
    if (par.has("layers")) {
      for (std::int64_t l : par.integers("layers")) choice.vstage_layers.push_back(static_cast<int>(l));
    } else {
      choice.vstage_layers = sim::split_layers(shape.layers, pp * chunks);
    }
    par.string("split", "even");
    par.check_no_unknown_fields();
    const std::string reason = schedule::unsupported_reason(*f, {pp, chunks, m, k});
    if (!reason.empty()) par.fail("schedule", reason);
    s = schedule::replicate(schedule::generate_schedule(*f, {pp, chunks, m, k}), dp);
    choice.family = family;
  }
  top.check_no_unknown_fields();

  int layer_sum = 0;
  for (int l : choice.vstage_layers) layer_sum += l;
  if (static_cast<std::int32_t>(choice.vstage_layers.size()) != s.layout.num_vstages || layer_sum != shape.layers) {
    par.fail("layers", "expected " + std::to_string(s.layout.num_vstages) + " layer counts summing to model.layers " +
                           std::to_string(shape.layers) + ", found " + std::to_string(choice.vstage_layers.size()) +
                           " summing to " + std::to_string(layer_sum));
  }
  if (auto v = schedule::validate(s)) par.fail("schedule_text", schedule::summary(s, *v));
  const int ranks = s.num_ranks();
  if (ranks > cluster.num_devices()) {
    par.fail("rank_vstages", "the plan has " + std::to_string(ranks) + " ranks but " + cluster.path + " has " +
                                 std::to_string(cluster.num_devices()) + " devices");
  }

  // Stage groups: ranks holding the same virtual stages, ordered by their first stage; rank r is
  // the cluster's device r; a rank's micro-batches are those its first chunk runs forward.
  std::map<std::vector<std::int32_t>, int> group_of;
  std::vector<std::vector<std::int32_t>> keys;
  for (int r = 0; r < ranks; ++r) {
    if (group_of.emplace(s.layout.rank_vstages[r], 0).second) keys.push_back(s.layout.rank_vstages[r]);
  }
  std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) {
    return *std::min_element(a.begin(), a.end()) < *std::min_element(b.begin(), b.end());
  });
  for (std::size_t g = 0; g < keys.size(); ++g) group_of[keys[g]] = static_cast<int>(g);
  choice.groups.resize(keys.size());
  choice.held = keys;
  for (int r = 0; r < ranks; ++r) {
    StageGroup& g = choice.groups[group_of[s.layout.rank_vstages[r]]];
    g.devices.push_back(r);
    g.microbatches.push_back(static_cast<int>(std::count_if(s.ranks[r].begin(), s.ranks[r].end(), [](const auto& a) {
      return a.kind == schedule::ActionKind::F && a.segment == 0 && a.chunk == 0;
    })));
  }
  choice.chunks = s.layout.max_chunks();
  choice.num_microbatches = s.layout.num_microbatches;
  out.global_batch = static_cast<std::int64_t>(choice.num_microbatches) * b;
  if (lengths == schedule::even_partition(shape, out.seq, k).lengths) {
    choice.split = schedule::SplitMethod::even;
  } else if (lengths == schedule::flops_partition(shape, out.seq, k).lengths) {
    choice.split = schedule::SplitMethod::flops;
  } else {
    train.fail("segments", "predictions need even or equal-FLOPs segment lengths (schedule::partition_sequence)");
  }
  return out;
}

}  // namespace plait::plan
