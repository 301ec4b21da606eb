#include "plait/data/document_length_file.h"

#include <algorithm>
#include <climits>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/core/printable_text.h"

namespace plait::data {
namespace fs = std::filesystem;
namespace {

constexpr const char* kFormat = "plait-document-lengths";
constexpr const char* kSuffix = ".lengths.json";

// The lengths file a path names: itself, or the one file of that suffix in a directory.
std::string lengths_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return path;
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(path, ec)) {
    const std::string n = e.path().filename().string();
    if (n.ends_with(kSuffix) && e.is_regular_file(ec)) found.push_back(e.path().string());
  }
  if (ec) throw InputError(path, "(directory)", "cannot list it: " + ec.message());
  if (found.size() == 1) return found.front();
  throw InputError(path, "(directory)",
                   found.empty() ? "holds no *.lengths.json (plait data prepare writes <name>.lengths.json beside the "
                                   "shards; prepare the corpus again with this plait, or name the file)"
                                 : "holds " + std::to_string(found.size()) + " *.lengths.json files (" + found[0] +
                                       ", ...); name the one to read");
}

}  // namespace

std::string document_lengths_file_name(const std::string& corpus_name) { return corpus_name + kSuffix; }

std::string document_lengths_text(const DocumentLengths& lengths, const std::string& split) {
  nlohmann::ordered_json bins = nlohmann::ordered_json::array();
  for (const auto& [lo, b] : lengths.bins) bins.push_back({b.lo, b.hi, b.count, b.tokens});
  nlohmann::ordered_json j;
  j["format"] = kFormat;
  j["version"] = 1;
  j["split"] = split;
  j["documents"] = lengths.count;
  j["tokens"] = lengths.tokens;
  j["longest"] = lengths.longest;
  j["bins"] = std::move(bins);
  // One bin a line: diffable, and short enough to read.
  std::string out = "{\n";
  for (auto it = j.begin(); it != j.end(); ++it) {
    out += " \"" + it.key() + "\": ";
    if (it.key() == "bins") {
      out += "[";
      for (std::size_t i = 0; i < it->size(); ++i) out += std::string(i ? ",\n  " : "\n  ") + (*it)[i].dump();
      out += it->empty() ? "]" : "\n ]";
    } else {
      out += it->dump();
    }
    out += std::next(it) == j.end() ? "\n" : ",\n";
  }
  return out + "}\n";
}

LengthHistogram read_document_lengths(const std::string& path) {
  LengthHistogram h;
  h.file = lengths_file(path);
  const nlohmann::json j = read_json_file(h.file);
  const JsonFields f(j, h.file);
  if (const std::string format = f.string("format"); format != kFormat) {
    f.fail("format", "expected \"" + std::string(kFormat) + "\", found \"" + printable_text(format) + "\"");
  }
  f.integer_in("version", 1, 1);
  if (const std::string split = f.string("split"); split != "train" && split != "val") {
    f.fail("split", "expected \"train\" or \"val\", found \"" + printable_text(split) + "\"");
  }
  h.documents = f.integer_in("documents", 1, INT64_MAX);
  h.tokens = f.integer_in("tokens", 1, INT64_MAX);
  h.longest = f.integer_in("longest", 1, INT64_MAX);
  const nlohmann::json& bins = f.raw("bins");
  if (!bins.is_array() || bins.empty()) f.fail("bins", "expected a non-empty array of [lo, hi, count, tokens]");
  std::int64_t documents = 0, tokens = 0, longest = 0;
  for (std::size_t i = 0; i < bins.size(); ++i) {
    const std::string field = "bins[" + std::to_string(i) + "]";
    const nlohmann::json& b = bins[i];
    if (!b.is_array() || b.size() != 4 || !std::all_of(b.begin(), b.end(), [](const nlohmann::json& x) {
          return x.is_number_integer() && x.get<std::int64_t>() >= 1;
        })) {
      f.fail(field, "expected [lo, hi, count, tokens], four integers >= 1, found " + printable_text(b.dump()));
    }
    LengthBin bin{b[0].get<std::int64_t>(), b[1].get<std::int64_t>(), b[2].get<std::int64_t>(), b[3].get<std::int64_t>()};
    const LengthBin expected = length_bin(bin.lo);
    if (bin.lo != expected.lo || bin.hi != expected.hi) {
      f.fail(field, "lengths " + std::to_string(bin.lo) + " .. " + std::to_string(bin.hi) + " are not one bin (the bin of " +
                        std::to_string(bin.lo) + " is " + std::to_string(expected.lo) + " .. " +
                        std::to_string(expected.hi) + ")");
    }
    if (!h.bins.empty() && bin.lo <= h.bins.back().hi) f.fail(field, "bins must be in increasing order of length");
    // count documents of lo .. hi tokens hold between count x lo and count x hi tokens.
    if (bin.count > INT64_MAX / bin.hi || bin.tokens < bin.count * bin.lo || bin.tokens > bin.count * bin.hi) {
      f.fail(field, std::to_string(bin.count) + " documents of " + std::to_string(bin.lo) + " .. " +
                        std::to_string(bin.hi) + " tokens cannot hold " + std::to_string(bin.tokens) + " tokens");
    }
    if (documents > INT64_MAX - bin.count || tokens > INT64_MAX - bin.tokens) f.fail(field, "the totals overflow");
    documents += bin.count;
    tokens += bin.tokens;
    longest = bin.hi;
    h.bins.push_back(bin);
  }
  if (documents != h.documents) {
    f.fail("documents", std::to_string(h.documents) + ", but the bins hold " + std::to_string(documents));
  }
  if (tokens != h.tokens) f.fail("tokens", std::to_string(h.tokens) + ", but the bins hold " + std::to_string(tokens));
  if (h.longest < h.bins.back().lo || h.longest > longest) {
    f.fail("longest", std::to_string(h.longest) + " is not in the last bin (" + std::to_string(h.bins.back().lo) + " .. " +
                          std::to_string(longest) + ")");
  }
  f.check_no_unknown_fields();
  return h;
}

}  // namespace plait::data
