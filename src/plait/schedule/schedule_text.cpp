#include "plait/schedule/schedule_text.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <vector>

#include "plait/core/error.h"
#include "plait/core/printable_text.h"

namespace plait::schedule {

namespace {

struct Inferred {
  std::int32_t microbatches = 0;
  std::int32_t segments = 0;
  std::int32_t chunks = 1;
};

Inferred infer_counts(const std::vector<std::vector<Action>>& ranks) {
  Inferred n;
  for (const auto& actions : ranks) {
    for (const Action& a : actions) {
      n.microbatches = std::max(n.microbatches, a.microbatch + 1);
      n.segments = std::max(n.segments, a.segment + 1);
      n.chunks = std::max(n.chunks, a.chunk + 1);
    }
  }
  return n;
}

[[noreturn]] void fail(const std::string& source, int line, std::size_t column,
                       const std::string& problem) {
  throw InputError(source, "line " + std::to_string(line) + ", column " + std::to_string(column),
                   problem);
}

// The whitespace-separated tokens of one line, with their 1-based columns.
struct Token {
  std::string_view text;
  std::size_t column;
};

std::vector<Token> split_tokens(std::string_view line) {
  std::vector<Token> tokens;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > start) tokens.push_back({line.substr(start, i - start), start + 1});
  }
  return tokens;
}

bool parse_count(std::string_view text, std::int32_t& value) {
  auto res = std::from_chars(text.data(), text.data() + text.size(), value);
  return res.ec == std::errc() && res.ptr == text.data() + text.size() && value >= 0;
}

}  // namespace

std::string format_schedule(const Schedule& schedule) {
  const Layout& layout = schedule.layout;
  const Inferred inferred = infer_counts(schedule.ranks);
  const bool with_chunk = std::max(layout.max_chunks(), int{inferred.chunks}) > 1;
  std::string out;
  if (layout.num_microbatches != inferred.microbatches) {
    out += "microbatches " + std::to_string(layout.num_microbatches) + "\n";
  }
  if (layout.num_segments != inferred.segments) {
    out += "segments " + std::to_string(layout.num_segments) + "\n";
  }
  // The default layout is interleaved over as many ranks as there are lines, with as many
  // chunks as the actions use.
  const bool default_layout = is_interleaved_layout(layout) &&
                              layout.num_ranks() == schedule.num_ranks() &&
                              layout.max_chunks() == inferred.chunks;
  if (!default_layout) {
    out += "layout";
    for (const auto& stages : layout.rank_vstages) {
      out += ' ';
      for (std::size_t c = 0; c < stages.size(); ++c) {
        if (c > 0) out += ',';
        out += std::to_string(stages[c]);
      }
    }
    out += '\n';
  }
  for (const auto& actions : schedule.ranks) {
    if (actions.empty()) out += '-';
    for (std::size_t i = 0; i < actions.size(); ++i) {
      if (i > 0) out += ' ';
      append_action(out, actions[i], with_chunk);
    }
    out += '\n';
  }
  return out;
}

Schedule parse_schedule(std::string_view text, const std::string& source) {
  Schedule schedule;
  std::int32_t microbatches = -1;
  std::int32_t segments = -1;
  bool have_layout = false;
  int layout_line = 0;
  int line_number = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (const std::size_t hash = line.find('#'); hash != std::string_view::npos) {
      line = line.substr(0, hash);
    }
    const std::vector<Token> tokens = split_tokens(line);
    if (tokens.empty()) continue;
    const std::string_view head = tokens[0].text;
    if (head == "microbatches" || head == "segments") {
      if (!schedule.ranks.empty()) {
        fail(source, line_number, tokens[0].column,
             "'" + std::string(head) + "' must come before the first rank's actions");
      }
      std::int32_t value = 0;
      if (tokens.size() != 2 || !parse_count(tokens[1].text, value) || value < 1) {
        fail(source, line_number, tokens.size() > 1 ? tokens[1].column : tokens[0].column,
             "expected '" + std::string(head) + " <positive integer>'");
      }
      (head == "microbatches" ? microbatches : segments) = value;
      continue;
    }
    if (head == "layout") {
      if (!schedule.ranks.empty() || have_layout) {
        fail(source, line_number, tokens[0].column,
             "'layout' must appear once, before the first rank's actions");
      }
      have_layout = true;
      layout_line = line_number;
      for (std::size_t t = 1; t < tokens.size(); ++t) {
        std::vector<std::int32_t> stages;
        std::string_view list = tokens[t].text;
        std::size_t offset = 0;
        while (true) {
          const std::size_t comma = std::min(list.find(',', offset), list.size());
          std::int32_t stage = 0;
          if (!parse_count(list.substr(offset, comma - offset), stage)) {
            fail(source, line_number, tokens[t].column + offset,
                 "expected a comma-separated list of virtual stage numbers for rank " +
                     std::to_string(t - 1) + ", found '" + printable_text(list) + "'");
          }
          stages.push_back(stage);
          if (comma == list.size()) break;
          offset = comma + 1;
        }
        schedule.layout.rank_vstages.push_back(std::move(stages));
      }
      if (schedule.layout.rank_vstages.empty()) {
        fail(source, line_number, tokens[0].column, "expected each rank's virtual stages after 'layout'");
      }
      continue;
    }
    std::vector<Action> actions;
    if (!(tokens.size() == 1 && head == "-")) {
      actions.reserve(tokens.size());
      for (const Token& token : tokens) {
        Action action;
        std::string error;
        std::size_t offset = 0;
        if (!parse_action(token.text, action, error, offset)) {
          fail(source, line_number, token.column + offset,
               error + " (in '" + printable_text(token.text) + "')");
        }
        actions.push_back(action);
      }
    }
    schedule.ranks.push_back(std::move(actions));
  }
  if (schedule.ranks.empty()) {
    throw InputError(source, "text", "expected one line of actions per rank, found none");
  }
  const Inferred inferred = infer_counts(schedule.ranks);
  Layout& layout = schedule.layout;
  layout.num_microbatches = microbatches > 0 ? microbatches : inferred.microbatches;
  layout.num_segments = segments > 0 ? segments : inferred.segments;
  if (have_layout) {
    if (layout.num_ranks() != schedule.num_ranks()) {
      throw InputError(source, "line " + std::to_string(layout_line),
                       "the layout lists " + std::to_string(layout.num_ranks()) +
                           " ranks but there are " + std::to_string(schedule.num_ranks()) +
                           " lines of actions");
    }
    std::int32_t max_stage = -1;
    for (const auto& stages : layout.rank_vstages) {
      for (std::int32_t s : stages) max_stage = std::max(max_stage, s);
    }
    layout.num_vstages = max_stage + 1;
  } else {
    layout = interleaved_layout(schedule.num_ranks(), inferred.chunks, layout.num_microbatches,
                                layout.num_segments);
  }
  return schedule;
}

Schedule read_schedule_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "file", "cannot open the schedule file");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return parse_schedule(buffer.str(), path);
}

}  // namespace plait::schedule
