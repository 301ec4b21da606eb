#include "plait/runtime/training_metrics.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <numeric>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"

namespace plait::runtime {
namespace {

std::vector<MetricsRankMemory> read_memory(const nlohmann::json& list, const std::string& file, const std::string& where) {
  if (!list.is_array()) throw InputError(file, where, "expected an array of ranks");
  std::vector<MetricsRankMemory> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const JsonFields r(list[i], file, where + "[" + std::to_string(i) + "]");
    MetricsRankMemory m;
    m.rank = static_cast<int>(r.integer_in("rank", 0, 1 << 24));
    m.stages = r.string("stages");
    const JsonFields peak = r.object("peak_bytes");
    for (std::size_t c = 0; c < kMemoryCategoryCount; ++c) m.peak[c] = peak.number(std::string(kMemoryCategoryNames[c]), 0);
    peak.check_no_unknown_fields();
    m.peak_total = r.number("peak_total_bytes");
    if (r.has("capacity_bytes") && !r.raw("capacity_bytes").is_null()) m.capacity = r.number("capacity_bytes");
    r.check_no_unknown_fields();
    out.push_back(m);
  }
  return out;
}

// A per-rank array of numbers.
std::vector<double> read_numbers(const JsonFields& f, const std::string& key) {
  const nlohmann::json& a = f.raw(key);
  if (!a.is_array()) f.fail(key, "expected an array of numbers, one per rank");
  std::vector<double> out;
  for (const nlohmann::json& v : a) {
    if (!v.is_number()) f.fail(key, "expected an array of numbers, one per rank");
    out.push_back(v.get<double>());
  }
  return out;
}

std::string bytes_text(double b) { return format_bytes(static_cast<std::size_t>(std::max(0.0, b))); }

std::string fixed(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

trace::ReportTable memory_table(const std::vector<MetricsRankMemory>& memory, const std::string& title,
                                const std::string& note) {
  trace::ReportTable t;
  t.title = title;
  t.header = {"rank", "stages"};
  for (std::string_view n : kMemoryCategoryNames) t.header.emplace_back(n);
  t.header.insert(t.header.end(), {"total (peak of the sum)", "capacity"});
  for (const MetricsRankMemory& m : memory) {
    std::vector<std::string> row = {std::to_string(m.rank), m.stages};
    for (double b : m.peak) row.push_back(bytes_text(b));
    row.push_back(bytes_text(m.peak_total));
    row.push_back(m.capacity ? bytes_text(*m.capacity) : "-");
    t.rows.push_back(row);
  }
  t.note = note;
  return t;
}

}  // namespace

nlohmann::json rank_memory_json(int rank, const std::string& stages, const MemoryReport& report,
                                std::optional<std::size_t> capacity) {
  nlohmann::json peak = nlohmann::json::object();
  for (std::size_t c = 0; c < kMemoryCategoryCount; ++c) peak[std::string(kMemoryCategoryNames[c])] = report.peak[c];
  return {{"rank", rank},
          {"stages", stages},
          {"peak_bytes", peak},
          {"peak_total_bytes", report.peak_total},
          {"capacity_bytes", capacity ? nlohmann::json(*capacity) : nlohmann::json(nullptr)}};
}

TrainingMetrics read_training_metrics(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "(file)", "cannot open the file");
  TrainingMetrics m;
  m.file = path;
  std::map<std::int64_t, MetricsStep> steps;
  std::map<std::int64_t, double> validations;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.empty()) continue;
    const std::string where = "line " + std::to_string(number);
    const nlohmann::json j = parse_json_text(line, path + ": " + where);
    const JsonFields f(j, path, where);
    if (f.has("run")) {
      f.object("run");
      m.runs.push_back(j.at("run"));
    } else if (f.has("memory")) {
      m.memory = read_memory(f.raw("memory"), path, where + ".memory");
      m.host_memory = f.has("host_memory") ? read_memory(f.raw("host_memory"), path, where + ".host_memory")
                                           : std::vector<MetricsRankMemory>{};
    } else if (f.has("val_loss")) {
      validations[f.integer("step")] = f.number("val_loss");
    } else if (f.has("straggler")) {
      const JsonFields g = f.object("straggler");
      MetricsStraggler x;
      x.step = f.integer("step");
      x.rank = static_cast<int>(g.integer_in("rank", 0, 1 << 24));
      x.flagged = g.boolean("flagged", true);
      x.vs_history = g.number("vs_history");
      x.vs_peers = g.number("vs_peers");
      g.check_no_unknown_fields();
      m.stragglers.push_back(x);
    } else if (f.has("rebalance")) {
      const JsonFields g = f.object("rebalance");
      MetricsRebalance x;
      x.step = f.integer("step");
      x.stages = g.integers("stages");
      x.ranks = g.integers("ranks");
      x.before = g.integers("before");
      x.after = g.integers("after");
      if (x.before.size() != x.ranks.size() || x.after.size() != x.ranks.size()) {
        g.fail("after", "expected as many shares before and after as ranks (" + std::to_string(x.ranks.size()) + ")");
      }
      x.rank = static_cast<int>(g.integer_in("rank", 0, 1 << 24));
      x.flagged = g.boolean("flagged", true);
      x.slowdown = g.number("slowdown");
      x.decide_seconds = g.number("decide_seconds");
      g.check_no_unknown_fields();
      m.rebalances.push_back(x);
    } else if (f.has("move_layers")) {
      const JsonFields g = f.object("move_layers");
      MetricsLayerMove x;
      x.step = f.integer("step");
      x.made = g.boolean("made", false);
      x.from = static_cast<int>(g.integer_in("from", 0, 1 << 24));
      x.to = static_cast<int>(g.integer_in("to", 0, 1 << 24));
      x.layers = static_cast<int>(g.integer_in("layers", 0, 1 << 24));
      x.before = g.integers("before");
      x.after = g.integers("after");
      if (x.before.size() != x.after.size()) {
        g.fail("after", "expected as many stages after as before (" + std::to_string(x.before.size()) + ")");
      }
      x.rank = static_cast<int>(g.integer_in("rank", 0, 1 << 24));
      x.flagged = g.boolean("flagged", true);
      x.slowdown = g.number("slowdown");
      x.bytes = g.number("bytes");
      x.cost_seconds = g.number("cost_seconds");
      x.saved_per_step = g.number("saved_per_step");
      x.horizon = g.integer("horizon");
      x.gain_seconds = g.number("gain_seconds");
      x.seconds = g.number("seconds");
      x.transfer_seconds = g.number("transfer_seconds");
      x.why = g.string("why");
      g.check_no_unknown_fields();
      m.moves.push_back(x);
    } else if (f.has("sample")) {
      m.samples.emplace_back(f.integer("step"), f.string("sample"));
    } else if (f.has("loss")) {
      MetricsStep s;
      s.step = f.integer("step");
      s.loss = f.number("loss");
      s.grad_norm = f.number("grad_norm");
      s.lr = f.number("lr");
      s.skipped = f.boolean("skipped", false);
      if (f.has("nonfinite")) f.string("nonfinite");
      if (f.has("perf")) {
        const JsonFields p = f.object("perf");
        s.step_seconds = p.number("step_seconds");
        s.tokens_per_second = p.number("tokens_per_second");
        for (const std::int64_t b : p.integers("peak_memory_bytes")) s.peak_memory_bytes.push_back(static_cast<double>(b));
        if (p.has("seconds_per_unit")) s.seconds_per_unit = read_numbers(p, "seconds_per_unit");
        if (p.has("wait_seconds")) s.wait_seconds = read_numbers(p, "wait_seconds");
        p.check_no_unknown_fields();
      }
      steps[s.step] = s;
    } else {
      throw InputError(path, where, "expected a step (loss), validation (val_loss), sample, straggler, rebalance, move_layers, run or "
                                   "memory record");
    }
    f.check_no_unknown_fields();
  }
  for (auto& [step, s] : steps) m.steps.push_back(s);
  for (auto& [step, v] : validations) m.validations.emplace_back(step, v);
  return m;
}

trace::Report training_report(const TrainingMetrics& m) {
  trace::Report r;
  const nlohmann::json run = m.runs.empty() ? nlohmann::json::object() : m.runs.back();
  const auto text = [&](const char* key) { return run.contains(key) && run.at(key).is_string() ? run.at(key).get<std::string>() : ""; };
  r.title = "plait training report" + (text("model").empty() ? "" : ": " + text("model"));
  r.summary.emplace_back("metrics", m.file);
  if (!text("config").empty()) r.summary.emplace_back("config", text("config"));
  if (run.contains("ranks")) {
    r.summary.emplace_back("layout", text("schedule") + " on " + run.at("ranks").dump() + " rank(s), " +
                                         (run.contains("tokens_per_step") ? run.at("tokens_per_step").dump() : "?") +
                                         " tokens/step, " + text("precision"));
  }
  if (m.runs.size() > 1) r.summary.emplace_back("runs", std::to_string(m.runs.size()) + " (appended: resumed or rerun)");
  if (!m.steps.empty()) {
    const std::size_t window = std::max<std::size_t>(1, std::min<std::size_t>(10, m.steps.size() / 2));
    const auto mean_loss = [&](std::size_t from) {
      double sum = 0;
      for (std::size_t i = from; i < from + window; ++i) sum += m.steps[i].loss;
      return sum / static_cast<double>(window);
    };
    r.summary.emplace_back("steps", std::to_string(m.steps.size()) + " (" + std::to_string(m.steps.front().step) + ".." +
                                        std::to_string(m.steps.back().step) + ")");
    r.summary.emplace_back("loss", fixed("%.4f", mean_loss(0)) + " -> " + fixed("%.4f", mean_loss(m.steps.size() - window)) +
                                       " (means of the first and last " + std::to_string(window) + " step(s))");
    std::vector<double> rates;
    for (const MetricsStep& s : m.steps) {
      if (s.tokens_per_second) rates.push_back(*s.tokens_per_second);
    }
    if (!rates.empty()) {
      std::sort(rates.begin(), rates.end());
      r.summary.emplace_back("tokens/s", fixed("%.0f", rates[rates.size() / 2]) + " (median of " + std::to_string(rates.size()) +
                                             " steps; min " + fixed("%.0f", rates.front()) + ", max " +
                                             fixed("%.0f", rates.back()) + ")");
    }
  }
  if (!m.validations.empty()) {
    const auto best = std::min_element(m.validations.begin(), m.validations.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
    r.summary.emplace_back("validation loss", fixed("%.4f", m.validations.back().second) + " at step " +
                                                  std::to_string(m.validations.back().first) + " (best " +
                                                  fixed("%.4f", best->second) + " at step " + std::to_string(best->first) + ")");
  }
  trace::ReportSeries loss{"training loss", {}, false}, val{"validation loss", {}, true}, lr{"learning rate", {}, false},
      norm{"gradient norm (before clipping)", {}, false}, rate{"tokens/s", {}, false};
  for (const MetricsStep& s : m.steps) {
    const double x = static_cast<double>(s.step);
    loss.points.emplace_back(x, s.loss);
    lr.points.emplace_back(x, s.lr);
    norm.points.emplace_back(x, s.grad_norm);
    if (s.tokens_per_second) rate.points.emplace_back(x, *s.tokens_per_second);
  }
  for (const auto& [step, v] : m.validations) val.points.emplace_back(static_cast<double>(step), v);
  val.dots = val.points.size() <= 200;
  r.charts.push_back({"Loss", "step", "cross-entropy (nats)", {loss, val}, false});
  r.charts.push_back({"Learning rate", "step", "learning rate", {lr}, false});
  r.charts.push_back({"Gradient norm", "step", "global norm", {norm}, true});
  // Each re-balance and layer move made as a dot on the throughput of the step after which it was
  // decided.
  trace::ReportSeries moved{"re-balanced after this step", {}, true}, relayered{"layers moved after this step", {}, true};
  const auto mark = [&](trace::ReportSeries& series, std::int64_t at) {
    for (const auto& [step, tokens] : rate.points) {
      if (step == static_cast<double>(at)) series.points.emplace_back(step, tokens);
    }
  };
  for (const MetricsRebalance& x : m.rebalances) mark(moved, x.step);
  for (const MetricsLayerMove& x : m.moves) {
    if (x.made) mark(relayered, x.step);
  }
  std::vector<trace::ReportSeries> throughput{rate, moved};
  if (!relayered.points.empty()) throughput.push_back(relayered);
  r.charts.push_back({"Throughput", "step", "tokens/s", throughput, false});
  if (!m.memory.empty()) {
    r.tables.push_back(memory_table(m.memory, "Peak memory by rank and category",
                                    "Measured by each rank's accounting (plait's memory tracker); each category's column is its "
                                    "own peak, the total the peak of their sum."));
  }
  if (!m.stragglers.empty()) {
    trace::ReportTable t;
    t.title = "Stragglers (flagged and cleared)";
    t.header = {"step", "rank", "change", "vs its history", "vs its peers"};
    for (const MetricsStraggler& x : m.stragglers) {
      t.rows.push_back({std::to_string(x.step), std::to_string(x.rank), x.flagged ? "flagged" : "cleared",
                        fixed("%.2fx", x.vs_history), fixed("%.2fx", x.vs_peers)});
    }
    t.note = "Compute seconds per unit of work against the rank's own recent median and against the other ranks' "
             "(docs/runtime.md, \"Stragglers and restarts\"); a flagged rank with data-parallel peers hands them "
             "micro-batches (re-balances below).";
    r.tables.push_back(t);
  }
  if (!m.rebalances.empty()) {
    const auto joined = [](const std::vector<std::int64_t>& v, const char* sep) {
      std::string out;
      for (std::int64_t x : v) out += (out.empty() ? "" : sep) + std::to_string(x);
      return out;
    };
    trace::ReportTable t;
    t.title = "Re-balances (micro-batch shares inside a stage's data-parallel group)";
    t.header = {"after step", "stages", "ranks", "shares", "because", "decided in"};
    for (const MetricsRebalance& x : m.rebalances) {
      t.rows.push_back({std::to_string(x.step), joined(x.stages, ", "), joined(x.ranks, ", "),
                        joined(x.before, "/") + " -> " + joined(x.after, "/"),
                        "rank " + std::to_string(x.rank) + (x.flagged ? " flagged " : " cleared ") + fixed("%.2fx", x.slowdown),
                        fixed("%.2f ms", 1e3 * x.decide_seconds)});
    }
    t.note = "The next step runs the new shares: the same global batch and micro-batches, other ranks for some of them "
             "(tier a; docs/runtime.md, \"Stragglers and restarts\").";
    r.tables.push_back(t);
  }
  if (!m.moves.empty()) {
    const auto joined = [](const std::vector<std::int64_t>& v) {
      std::string out;
      for (std::int64_t x : v) out += (out.empty() ? "" : "/") + std::to_string(x);
      return out;
    };
    trace::ReportTable t;
    t.title = "Layer moves (between adjacent stages)";
    t.header = {"after step", "move", "layers per stage", "because", "cost (modelled)", "saves (predicted)", "took"};
    for (const MetricsLayerMove& x : m.moves) {
      t.rows.push_back({std::to_string(x.step),
                        std::string(x.made ? "moved " : "declined ") + std::to_string(x.layers) + " from stage " +
                            std::to_string(x.from) + " to " + std::to_string(x.to),
                        joined(x.before) + " -> " + joined(x.after),
                        "rank " + std::to_string(x.rank) + (x.flagged ? " flagged " : " cleared ") + fixed("%.2fx", x.slowdown),
                        fixed("%.3f s", x.cost_seconds) + fixed(" (%.2f MiB)", x.bytes / (1 << 20)),
                        fixed("%.2f ms", 1e3 * x.saved_per_step) + " x " + std::to_string(x.horizon) + " steps = " +
                            fixed("%.3f s", x.gain_seconds),
                        x.made ? fixed("%.3f s", x.seconds) + fixed(" (%.3f s sending)", x.transfer_seconds) : x.why});
    }
    t.note = "Tier b: a flagged rank alone on its stage moves layers to a neighbour when the estimator says the move "
             "repays its cost over the horizon; the next step runs the new partition (docs/runtime.md, \"Stragglers "
             "and restarts\").";
    r.tables.push_back(t);
  }
  bool host = false;
  for (const MetricsRankMemory& h : m.host_memory) host = host || h.peak_total > 0;
  if (host) r.tables.push_back(memory_table(m.host_memory, "Host tier peak by rank (offloaded state)", ""));
  if (!m.samples.empty()) {
    trace::ReportTable t;
    t.title = "Samples (train.sample_every)";
    t.header = {"step", "text"};
    t.prose = true;
    const std::size_t first = m.samples.size() > 5 ? m.samples.size() - 5 : 0;
    for (std::size_t i = first; i < m.samples.size(); ++i) t.rows.push_back({std::to_string(m.samples[i].first), m.samples[i].second});
    if (first > 0) t.note = "the last 5 of " + std::to_string(m.samples.size());
    r.tables.push_back(t);
  }
  return r;
}

}  // namespace plait::runtime
