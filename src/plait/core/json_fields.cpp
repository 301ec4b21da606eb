#include "plait/core/json_fields.h"

#include <fstream>
#include <sstream>

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
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "(file)", "cannot open the file");
  std::stringstream text;
  text << in.rdbuf();
  return parse_json_text(text.str(), path);
}

void write_json_file(const std::string& path, const nlohmann::json& document, int indent) {
  std::ofstream out(path);
  if (!out) throw InputError(path, "(file)", "cannot open the file for writing");
  out << document.dump(indent) << '\n';
  if (!out) throw InputError(path, "(file)", "writing the file failed");
}

nlohmann::json parse_json_text(std::string_view text, const std::string& file) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(file, "(syntax)", "malformed JSON at byte " + std::to_string(e.byte));
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for a double
    throw InputError(file, "(syntax)", std::string("invalid JSON: ") + e.what());
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
