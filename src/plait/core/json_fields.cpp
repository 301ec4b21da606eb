#include "plait/core/json_fields.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "plait/core/atomic_file.h"
#include "plait/core/printable_text.h"

namespace plait {
namespace {

std::string type_name(const nlohmann::json& v) {
  if (v.is_number_integer()) return "integer " + v.dump();
  if (v.is_number()) return "number " + v.dump();
  if (v.is_string()) return "string " + v.dump();
  return std::string(v.type_name());
}

}  // namespace

nlohmann::json read_json_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw InputError(path, "(file)", "is a directory; expected a JSON file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "(file)", "cannot open the file");
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InputError(path, "(file)", "read error");
  return parse_json_text(text.str(), path);
}

void write_json_file(const std::string& path, const nlohmann::json& document, int indent) {
  // Atomically, through a temporary file of a unique name (a link at `path` is replaced, never
  // written through; a failed write leaves the old file).
  write_file_atomically(path, document.dump(indent) + "\n");
}

namespace {

// Where the parser is, for errors: one frame per open object (its keys so far and the current
// key) or array (the index of the element being read). nlohmann keeps only the last of two equal
// keys, so strictness needs this watch over the parse.
class ParsePath {
 public:
  // The parser callback: returns true (keep everything); throws InputError on a repeated key.
  bool on_event(nlohmann::json::parse_event_t event, const nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        begin_element();
        frames_.push_back({event == Event::object_start, {}, {}, -1});
        break;
      case Event::object_end:
      case Event::array_end:
        if (!frames_.empty()) frames_.pop_back();
        break;
      case Event::key: {
        Frame& f = frames_.back();
        f.key = parsed.get<std::string>();
        if (!f.keys.insert(f.key).second) {
          throw InputError(file_, path(), "the key \"" + printable_text(f.key, 64) +
                                              "\" appears twice in one object (reading is strict: "
                                              "which one is meant?)");
        }
        break;
      }
      case Event::value:
        begin_element();
        break;
    }
    return true;
  }
  explicit ParsePath(std::string file) : file_(std::move(file)) {}

  // "train.lr", "parallel.devices[2].type"; "(top level)" outside any object or array. With
  // `next_element`, an innermost array names the element after the last one begun: the parser
  // failed on a value before announcing it.
  std::string path(bool next_element = false) const {
    std::string p;
    for (std::size_t i = 0; i < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      if (f.object) {
        if (f.key.empty() && f.keys.empty()) break;
        p += (p.empty() ? "" : ".") + printable_text(f.key, 64);
      } else {
        const long long index = f.index + (next_element && i + 1 == frames_.size() ? 1 : 0);
        if (index < 0) break;
        p += "[" + std::to_string(index) + "]";
      }
    }
    return p.empty() ? "(top level)" : p;
  }

 private:
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string key;
    long long index;  // arrays: the element being read
  };
  void begin_element() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
  }
  std::string file_;
  std::vector<Frame> frames_;
};

}  // namespace

nlohmann::json parse_json_text(std::string_view text, const std::string& file) {
  ParsePath where(file);
  const nlohmann::json::parser_callback_t watch = [&where](int, nlohmann::json::parse_event_t event,
                                                          nlohmann::json& parsed) {
    return where.on_event(event, parsed);
  };
  try {
    return nlohmann::json::parse(text, watch);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(file, "(syntax)", "malformed JSON at byte " + std::to_string(e.byte));
  } catch (const nlohmann::json::out_of_range& e) {
    // A number beyond a double ("1e400"): nlohmann says "number overflow parsing '1e400'".
    const std::string what = e.what();
    const std::size_t open = what.find('\''), close = what.rfind('\'');
    const std::string number = open != std::string::npos && close > open
                                   ? printable_text(what.substr(open + 1, close - open - 1), 40)
                                   : std::string("a number");
    throw InputError(file, where.path(true),
                     number + " is beyond the range of a double (about 1.8e308 in magnitude)");
  } catch (const nlohmann::json::exception&) {
    throw InputError(file, "(syntax)", "invalid JSON near " + where.path());
  }
}

JsonFields::JsonFields(const nlohmann::json& object, std::string file, std::string path)
    : object_(&object), file_(std::move(file)), path_(std::move(path)) {
  if (!object.is_object()) {
    throw InputError(file_, path_.empty() ? "(top level)" : path_,
                     "expected a JSON object, found " + type_name(object));
  }
}

std::string JsonFields::field_path(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

void JsonFields::fail(const std::string& key, const std::string& problem) const {
  throw InputError(file_, field_path(key), problem);
}

bool JsonFields::has(const std::string& key) const { return object_->contains(key); }

const nlohmann::json& JsonFields::get(const std::string& key, nlohmann::json::value_t expected,
                                      const char* expected_name) const {
  auto it = object_->find(key);
  if (it == object_->end()) fail(key, std::string("missing; expected ") + expected_name);
  read_.insert(key);
  const nlohmann::json& v = *it;
  bool ok = false;
  switch (expected) {
    case nlohmann::json::value_t::number_integer:
      ok = v.is_number_integer();
      break;
    case nlohmann::json::value_t::number_float:
      ok = v.is_number();
      break;
    default:
      ok = v.type() == expected;
  }
  if (!ok) fail(key, std::string("expected ") + expected_name + ", found " + type_name(v));
  return v;
}

std::int64_t JsonFields::integer(const std::string& key) const {
  const auto& v = get(key, nlohmann::json::value_t::number_integer, "an integer");
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > INT64_MAX) fail(key, "integer too large");
  return v.get<std::int64_t>();
}

std::int64_t JsonFields::integer(const std::string& key, std::int64_t fallback) const {
  return has(key) ? integer(key) : fallback;
}

std::int64_t JsonFields::integer_in(const std::string& key, std::int64_t lo,
                                    std::int64_t hi) const {
  const std::int64_t v = integer(key);
  if (v < lo || v > hi) {
    fail(key, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                  "], found " + std::to_string(v));
  }
  return v;
}

std::int64_t JsonFields::integer_in(const std::string& key, std::int64_t lo, std::int64_t hi,
                                    std::int64_t fallback) const {
  return has(key) ? integer_in(key, lo, hi) : fallback;
}

double JsonFields::number(const std::string& key) const {
  return get(key, nlohmann::json::value_t::number_float, "a number").get<double>();
}

double JsonFields::number(const std::string& key, double fallback) const {
  return has(key) ? number(key) : fallback;
}

bool JsonFields::boolean(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  return get(key, nlohmann::json::value_t::boolean, "true or false").get<bool>();
}

std::string JsonFields::string(const std::string& key) const {
  return get(key, nlohmann::json::value_t::string, "a string").get<std::string>();
}

std::string JsonFields::string(const std::string& key, const std::string& fallback) const {
  return has(key) ? string(key) : fallback;
}

std::vector<std::int64_t> JsonFields::integers(const std::string& key) const {
  const auto& v = get(key, nlohmann::json::value_t::array, "an array of integers");
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number_integer()) {
      fail(key + "[" + std::to_string(i) + "]", "expected an integer, found " + type_name(v[i]));
    }
    out.push_back(v[i].get<std::int64_t>());
  }
  return out;
}

std::vector<std::string> JsonFields::strings(const std::string& key) const {
  const auto& v = get(key, nlohmann::json::value_t::array, "an array of strings");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      fail(key + "[" + std::to_string(i) + "]", "expected a string, found " + type_name(v[i]));
    }
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

JsonFields JsonFields::object(const std::string& key) const {
  const auto& v = get(key, nlohmann::json::value_t::object, "an object");
  return JsonFields(v, file_, field_path(key));
}

const nlohmann::json& JsonFields::raw(const std::string& key) const {
  auto it = object_->find(key);
  if (it == object_->end()) fail(key, "missing");
  read_.insert(key);
  return *it;
}

void JsonFields::check_no_unknown_fields() const {
  for (auto it = object_->begin(); it != object_->end(); ++it) {
    if (!read_.contains(it.key())) fail(it.key(), "unknown field");
  }
}

}  // namespace plait
