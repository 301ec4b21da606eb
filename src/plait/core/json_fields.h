#pragma once
// Strict reading of JSON inputs (configs, cluster specs, plans): every error names the file and
// the dotted field path, says what was expected and what was found; unknown fields are errors
// (a typo must not silently fall back to a default).
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "plait/core/error.h"

namespace plait {

// Reads and parses a JSON file; a missing file or a syntax error is an InputError naming the
// file (and the byte offset for syntax errors).
nlohmann::json read_json_file(const std::string& path);

// Writes `document` to `path` (indented by `indent` spaces, a newline at the end); a file that
// cannot be opened or written is an InputError naming it.
void write_json_file(const std::string& path, const nlohmann::json& document, int indent = 2);

// Parses JSON text that came from `file`; any failure (syntax, or a number beyond a double) is
// an InputError naming the file, never a library exception.
nlohmann::json parse_json_text(std::string_view text, const std::string& file);

// A view of one JSON object at a field path inside a file. Reads fields by name, remembers which
// were read, and check_no_unknown_fields() rejects the rest.
class JsonFields {
 public:
  JsonFields(const nlohmann::json& object, std::string file, std::string path = "");

  bool has(const std::string& key) const;
  std::int64_t integer(const std::string& key) const;
  std::int64_t integer(const std::string& key, std::int64_t fallback) const;
  // An integer in [lo, hi].
  std::int64_t integer_in(const std::string& key, std::int64_t lo, std::int64_t hi) const;
  std::int64_t integer_in(const std::string& key, std::int64_t lo, std::int64_t hi,
                          std::int64_t fallback) const;
  double number(const std::string& key) const;
  double number(const std::string& key, double fallback) const;
  bool boolean(const std::string& key, bool fallback) const;
  std::string string(const std::string& key) const;
  std::string string(const std::string& key, const std::string& fallback) const;
  std::vector<std::int64_t> integers(const std::string& key) const;
  std::vector<std::string> strings(const std::string& key) const;
  JsonFields object(const std::string& key) const;
  const nlohmann::json& raw(const std::string& key) const;

  // Throws InputError for the first field that was never read.
  void check_no_unknown_fields() const;

  // Raise an InputError about `key` in this object.
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const;
  std::string field_path(const std::string& key) const;
  const std::string& file() const { return file_; }

 private:
  const nlohmann::json& get(const std::string& key, nlohmann::json::value_t expected,
                            const char* expected_name) const;

  const nlohmann::json* object_;
  std::string file_;
  std::string path_;
  mutable std::set<std::string> read_;
};

}  // namespace plait
