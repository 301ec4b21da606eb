#include "plait/checkpoint/checkpoint_manifest.h"

#include <map>

#include "plait/core/crc32c.h"
#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/core/printable_text.h"

namespace plait::checkpoint {
namespace {

constexpr const char* kFormat = "plait-checkpoint";
constexpr std::int64_t kVersion = 1;

bool plain_file_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
         s.find('\0') == std::string::npos && s != "manifest.json";
}

}  // namespace

std::string manifest_to_text(const CheckpointManifest& m) {
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const ManifestFile& f : m.files) {
    files.push_back({{"path", f.path},
                     {"bytes", f.bytes},
                     {"crc32c", crc32c_text(f.crc32c)},
                     {"tensors", f.tensors}});
  }
  nlohmann::ordered_json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["step"] = m.step;
  j["config"] = m.config;
  j["data_position"] = m.data_position;
  j["rng_state"] = m.rng_state;
  j["optimizer"] = m.optimizer;
  if (!m.working_directory.empty()) j["working_directory"] = m.working_directory;
  j["files"] = files;
  return j.dump(2) + "\n";
}

CheckpointManifest parse_manifest(std::string_view text, const std::string& file) {
  const nlohmann::json j = parse_json_text(text, file);
  const JsonFields f(j, file);
  if (f.string("format") != kFormat) {
    f.fail("format", "expected \"plait-checkpoint\", found \"" + f.string("format") + "\"");
  }
  f.integer_in("version", kVersion, kVersion);
  CheckpointManifest m;
  m.step = f.integer_in("step", 0, INT64_MAX);
  m.config = f.raw("config");
  m.data_position = f.raw("data_position");
  m.rng_state = f.raw("rng_state");
  if (f.has("optimizer")) m.optimizer = f.raw("optimizer");
  if (f.has("working_directory")) {
    m.working_directory = f.string("working_directory");
    if (m.working_directory.empty() || m.working_directory.front() != '/' ||
        m.working_directory.find('\0') != std::string::npos) {
      f.fail("working_directory", "expected an absolute directory, found \"" +
                                      printable_text(m.working_directory) + "\"");
    }
  }
  const nlohmann::json& files = f.raw("files");
  if (!files.is_array()) f.fail("files", "expected an array of files");
  std::map<std::string, std::string> owner;  // tensor -> field of its first listing
  std::map<std::string, std::size_t> paths;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string at = "files[" + std::to_string(i) + "]";
    const JsonFields e(files[i], file, at);
    ManifestFile mf;
    mf.path = e.string("path");
    if (!plain_file_name(mf.path)) {
      e.fail("path", "expected a plain file name inside the checkpoint directory, found \"" +
                         mf.path + "\"");
    }
    if (auto [it, fresh] = paths.emplace(mf.path, i); !fresh) {
      e.fail("path", "\"" + mf.path + "\" is listed twice (also files[" + std::to_string(it->second) + "])");
    }
    mf.bytes = static_cast<std::uint64_t>(e.integer_in("bytes", 8, INT64_MAX));
    const std::string crc = e.string("crc32c");
    if (!parse_crc32c_text(crc, mf.crc32c)) {
      e.fail("crc32c", "expected \"0x\" and 8 lower-case hex digits, found \"" + crc + "\"");
    }
    mf.tensors = e.strings("tensors");
    for (std::size_t k = 0; k < mf.tensors.size(); ++k) {
      const std::string here = at + ".tensors[" + std::to_string(k) + "]";
      if (auto [it, fresh] = owner.emplace(mf.tensors[k], here); !fresh) {
        throw InputError(file, here,
                         "tensor \"" + mf.tensors[k] + "\" is listed twice (also " + it->second + ")");
      }
    }
    e.check_no_unknown_fields();
    m.files.push_back(std::move(mf));
  }
  f.check_no_unknown_fields();
  return m;
}

}  // namespace plait::checkpoint
