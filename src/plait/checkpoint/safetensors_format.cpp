#include "plait/checkpoint/safetensors_format.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "plait/core/error.h"

namespace plait::checkpoint {
namespace {

using nlohmann::json;

std::string tensor_field(const std::string& name, const std::string& field) {
  return "tensor " + json(name).dump() + (field.empty() ? "" : " " + field);
}

// Element count times the element size, or false on overflow.
bool tensor_bytes(const std::vector<std::int64_t>& shape, StoredType type, std::uint64_t& bytes) {
  std::uint64_t n = stored_type_size(type);
  for (std::int64_t d : shape) {
    const auto u = static_cast<std::uint64_t>(d);
    if (u != 0 && n > UINT64_MAX / u) return false;
    n *= u;
  }
  bytes = n;
  return true;
}

SafetensorsEntry parse_entry(const std::string& name, const json& v, const std::string& file, AcceptedTypes accept) {
  if (!v.is_object()) {
    throw InputError(file, tensor_field(name, ""),
                     "expected an object {dtype, shape, data_offsets}, found " +
                         std::string(v.type_name()));
  }
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it.key() != "dtype" && it.key() != "shape" && it.key() != "data_offsets") {
      throw InputError(file, tensor_field(name, it.key()),
                       "unknown field (expected dtype, shape, data_offsets)");
    }
  }
  const auto need = [&](const char* key) -> const json& {
    auto it = v.find(key);
    if (it == v.end()) throw InputError(file, tensor_field(name, key), "missing");
    return *it;
  };
  const json& dtype = need("dtype");
  SafetensorsEntry e;
  e.name = name;
  const std::string type = dtype.is_string() ? dtype.get<std::string>() : "";
  if (type == "F32") {
    e.dtype = StoredType::f32;
  } else if (accept == AcceptedTypes::floats && type == "F16") {
    e.dtype = StoredType::f16;
  } else if (accept == AcceptedTypes::floats && type == "BF16") {
    e.dtype = StoredType::bf16;
  } else if (accept == AcceptedTypes::floats) {
    throw InputError(file, tensor_field(name, "dtype"),
                     "expected \"F32\", \"F16\" or \"BF16\" (plait reads floating-point weights), found " +
                         dtype.dump());
  } else {
    throw InputError(file, tensor_field(name, "dtype"),
                     "expected \"F32\" (plait stores fp32 tensors), found " + dtype.dump());
  }
  const json& shape = need("shape");
  if (!shape.is_array()) {
    throw InputError(file, tensor_field(name, "shape"),
                     "expected an array of dimensions, found " + shape.dump());
  }
  for (const json& d : shape) {
    if (!d.is_number_unsigned() || d.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
      throw InputError(file, tensor_field(name, "shape"),
                       "expected non-negative integer dimensions, found " + shape.dump());
    }
    e.shape.push_back(d.get<std::int64_t>());
  }
  const json& offsets = need("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    throw InputError(file, tensor_field(name, "data_offsets"),
                     "expected [begin, end] as two non-negative integers, found " + offsets.dump());
  }
  e.begin = offsets[0].get<std::uint64_t>();
  e.end = offsets[1].get<std::uint64_t>();
  if (e.end < e.begin) {
    throw InputError(file, tensor_field(name, "data_offsets"),
                     "expected begin <= end, found " + offsets.dump());
  }
  std::uint64_t bytes = 0;
  if (!tensor_bytes(e.shape, e.dtype, bytes) || bytes != e.end - e.begin) {
    throw InputError(file, tensor_field(name, "data_offsets"),
                     "shape " + shape.dump() + " of " + std::string(stored_type_name(e.dtype)) + " needs " +
                         (tensor_bytes(e.shape, e.dtype, bytes) ? std::to_string(bytes) : "too many") +
                         " bytes, the offsets " + offsets.dump() + " span " +
                         std::to_string(e.end - e.begin));
  }
  return e;
}

}  // namespace

std::string_view stored_type_name(StoredType type) {
  switch (type) {
    case StoredType::f16: return "F16";
    case StoredType::bf16: return "BF16";
    case StoredType::f32: break;
  }
  return "F32";
}

std::uint64_t parse_safetensors_header_length(std::span<const std::byte> first8,
                                              std::uint64_t file_size, const std::string& file) {
  if (file_size < 8 || first8.size() < 8) {
    throw InputError(file, "offset 0 (header length)",
                     "expected an 8-byte header length, but the file has " +
                         std::to_string(file_size) + " bytes");
  }
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint8_t>(first8[i]);
  if (n > kMaxSafetensorsHeader || n > file_size - 8) {
    throw InputError(file, "offset 0 (header length)",
                     "the header claims " + std::to_string(n) + " bytes; expected at most " +
                         std::to_string(std::min<std::uint64_t>(kMaxSafetensorsHeader, file_size - 8)) +
                         " (the file has " + std::to_string(file_size) + " bytes)");
  }
  if (n < 2) {
    throw InputError(file, "offset 0 (header length)",
                     "expected a JSON header of at least 2 bytes, found " + std::to_string(n));
  }
  return n;
}

SafetensorsHeader parse_safetensors_header(std::span<const std::byte> header_json,
                                           std::uint64_t file_size, const std::string& file,
                                           AcceptedTypes accept) {
  const std::string_view text(reinterpret_cast<const char*>(header_json.data()), header_json.size());
  if (text.empty() || text.front() != '{') {
    throw InputError(file, "offset 8 (header)", "expected the JSON header to begin with '{'");
  }
  // Duplicate names are forbidden but a JSON object keeps only one of them, so watch the keys
  // of the top-level object as they are parsed.
  std::set<std::string> keys;
  std::string duplicate;
  const json::parser_callback_t watch = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && !keys.insert(parsed.get<std::string>()).second &&
        duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json h;
  try {
    h = json::parse(text, watch);
  } catch (const json::parse_error& e) {
    throw InputError(file, "offset 8 (header)",
                     "malformed JSON at header byte " + std::to_string(e.byte));
  } catch (const json::out_of_range&) {  // a number too large for a double ("1e999")
    throw InputError(file, "offset 8 (header)", "a number is beyond the range of a double (about 1.8e308 in magnitude)");
  } catch (const json::exception&) {
    throw InputError(file, "offset 8 (header)", "invalid JSON");
  }
  if (!duplicate.empty()) {
    throw InputError(file, tensor_field(duplicate, ""), "the name appears twice in the header");
  }
  if (!h.is_object()) throw InputError(file, "offset 8 (header)", "expected a JSON object");
  SafetensorsHeader out;
  out.buffer_start = 8 + header_json.size();
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) {
        throw InputError(file, "__metadata__", "expected an object of strings");
      }
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string()) {
          throw InputError(file, "__metadata__." + m.key(),
                           "expected a string, found " + m.value().dump());
        }
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    out.tensors.push_back(parse_entry(it.key(), it.value(), file, accept));
  }
  // The buffer must be covered exactly: sorted by offset, each tensor starts where the previous
  // one ended, and the last ends at the end of the file.
  std::sort(out.tensors.begin(), out.tensors.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const std::uint64_t buffer = file_size - out.buffer_start;
  std::uint64_t expected = 0;
  for (const SafetensorsEntry& e : out.tensors) {
    if (e.begin != expected) {
      throw InputError(file, tensor_field(e.name, "data_offsets"),
                       "expected to begin at " + std::to_string(expected) +
                           (e.begin < expected ? " (it overlaps the previous tensor)" : " (a hole before it)") +
                           ", found " + std::to_string(e.begin));
    }
    expected = e.end;
  }
  if (expected != buffer) {
    throw InputError(file, "(buffer)",
                     "the tensors cover " + std::to_string(expected) + " bytes of the buffer, but it has " +
                         std::to_string(buffer) + " bytes (file of " + std::to_string(file_size) + ")");
  }
  return out;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string make_safetensors_header(std::span<const TensorLayout> tensors,
                                    const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps the tensors in buffer order, which is what a reader listing the header
  // shows.
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::set<std::string> names;
  std::uint64_t offset = 0;
  for (const TensorLayout& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || !names.insert(t.name).second) {
      throw Error("safetensors: tensor name \"" + t.name + "\" is empty, reserved or repeated");
    }
    std::uint64_t bytes = 0;
    for (std::int64_t d : t.shape) {
      if (d < 0) throw Error("safetensors: tensor \"" + t.name + "\" has a negative dimension");
    }
    if (!tensor_bytes(t.shape, t.dtype, bytes)) throw Error("safetensors: tensor \"" + t.name + "\" is too large");
    h[t.name] = {{"dtype", std::string(stored_type_name(t.dtype))},
                 {"shape", t.shape},
                 {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text;
  try {
    text = h.dump();
  } catch (const nlohmann::json::type_error&) {
    throw Error("safetensors: a tensor name or metadata value is not valid UTF-8");
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // buffer starts 8-byte aligned
  std::string out(8, '\0');
  const std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + text;
}

}  // namespace plait::checkpoint
