#include "plait/checkpoint/checkpoint_store.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "plait/checkpoint/atomic_file.h"
#include "plait/core/crc32c.h"
#include "plait/core/error.h"
#include "plait/core/progress.h"

namespace plait::checkpoint {
namespace fs = std::filesystem;
namespace {

constexpr const char* kManifest = "manifest.json";
constexpr const char* kLatest = "latest";
constexpr const char* kPartial = ".partial";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "(file)", "cannot open the file");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// "step_<digits>" -> the step, or -1.
std::int64_t step_of(const std::string& name) {
  if (name.size() <= 5 || name.compare(0, 5, "step_") != 0 || name.size() > 5 + 18) return -1;
  std::int64_t s = 0;
  for (std::size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    s = s * 10 + (name[i] - '0');
  }
  return s;
}

// "step_<digits>.partial" -> the step, or -1.
std::int64_t partial_step(const std::string& name) {
  const std::string suffix = kPartial;
  if (!name.ends_with(suffix)) return -1;
  return step_of(name.substr(0, name.size() - suffix.size()));
}

// The CRC-32C and size of a whole file, read in 1 MiB blocks.
std::pair<std::uint64_t, std::uint32_t> checksum_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "(file)", "cannot open the file");
  std::vector<char> block(1 << 20);
  std::uint64_t bytes = 0;
  std::uint32_t crc = 0;
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    crc = crc32c(std::as_bytes(std::span(block.data(), got)), crc);
    bytes += got;
    note_progress();  // reading a large checkpoint is progress for the stall watchdog
  }
  if (in.bad()) throw InputError(path, "(file)", "read error");
  return {bytes, crc};
}

}  // namespace

std::string checkpoint_dir_name(std::int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
  return buf;
}

std::int64_t checkpoint_dir_step(const std::string& dir) {
  return step_of(fs::path(dir).filename().string());
}

std::string checkpoint_staging_dir(const std::string& root, std::int64_t step) {
  return (fs::path(root) / (checkpoint_dir_name(step) + kPartial)).string();
}

void create_checkpoint_root(const std::string& root) {
  std::error_code ec;
  if (fs::exists(root, ec) && !fs::is_directory(root, ec)) {
    throw InputError(root, "(checkpoint directory)", "is a file; checkpoints need a directory here");
  }
  fs::create_directories(root, ec);
  if (ec) throw InputError(root, "(checkpoint directory)", "cannot create it: " + ec.message());
}

std::string begin_checkpoint(const std::string& root, std::int64_t step) {
  if (step < 0) throw Error("checkpoint: step must be >= 0, found " + std::to_string(step));
  create_checkpoint_root(root);
  const fs::path staging = checkpoint_staging_dir(root, step);
  std::error_code ec;
  fs::remove_all(staging, ec);  // left by a crashed attempt
  if (!ec) fs::create_directory(staging, ec);
  if (ec) throw Error("checkpoint: cannot create " + staging.string() + ": " + ec.message());
  fsync_directory(root);
  return staging.string();
}

ManifestFile write_checkpoint_file(const std::string& staging_dir, const std::string& file_name,
                                   std::span<const TensorRef> tensors,
                                   const std::map<std::string, std::string>& metadata) {
  if (file_name.empty() || file_name.find('/') != std::string::npos || file_name == kManifest ||
      file_name == "." || file_name == "..") {
    throw Error("checkpoint: \"" + file_name + "\" is not a plain tensor file name");
  }
  const WrittenFile w = write_safetensors((fs::path(staging_dir) / file_name).string(), tensors, metadata);
  ManifestFile f{file_name, w.bytes, w.crc32c, {}};
  for (const TensorRef& t : tensors) f.tensors.push_back(t.name);
  return f;
}

std::string commit_checkpoint(const std::string& root, const CheckpointManifest& manifest,
                              int keep_last, const std::function<void()>& after_rename) {
  const std::string name = checkpoint_dir_name(manifest.step);
  const fs::path staging = fs::path(root) / (name + kPartial);
  const fs::path final_dir = fs::path(root) / name;
  if (!fs::is_directory(staging)) {
    throw Error("checkpoint: " + staging.string() + " does not exist; call begin_checkpoint first");
  }
  // Round-trip the manifest through its parser: what we publish must be what we can load.
  const std::string text = manifest_to_text(manifest);
  parse_manifest(text, (staging / kManifest).string());
  for (const ManifestFile& f : manifest.files) {
    std::error_code ec;
    const auto size = fs::file_size(staging / f.path, ec);
    if (ec || size != f.bytes) {
      throw Error("checkpoint: step " + std::to_string(manifest.step) + ": " + f.path +
                  (ec ? " was not written" : " has " + std::to_string(size) + " bytes, expected " +
                                                 std::to_string(f.bytes)));
    }
  }
  write_file_atomically((staging / kManifest).string(), text);
  fsync_directory(staging.string());
  // Re-saving a step (e.g. after resuming from an older checkpoint) replaces its directory, but
  // never the one `latest` names: for a moment there would be no complete checkpoint.
  // (A `latest` that is malformed or names a missing directory protects nothing; it is replaced
  // below.)
  std::optional<std::string> latest;
  try {
    latest = latest_checkpoint(root);
  } catch (const InputError&) {
  }
  if (latest && fs::path(*latest).filename() == name) {
    throw Error("checkpoint: step " + std::to_string(manifest.step) +
                " is the latest checkpoint; refusing to overwrite it");
  }
  std::error_code ec;
  fs::remove_all(final_dir, ec);
  if (!ec) fs::rename(staging, final_dir, ec);
  if (ec) throw Error("checkpoint: cannot rename " + staging.string() + " to " + final_dir.string() + ": " + ec.message());
  fsync_directory(root);
  if (after_rename) after_rename();
  write_file_atomically((fs::path(root) / kLatest).string(), name + "\n");
  // Staging directories of earlier steps are leftovers of crashed saves.
  for (const auto& e : fs::directory_iterator(root)) {
    const std::int64_t s = partial_step(e.path().filename().string());
    if (s >= 0 && s < manifest.step) {
      fs::remove_all(e.path());
    }
  }
  if (keep_last > 0) {
    std::vector<std::string> all = list_checkpoints(root);
    for (std::size_t i = 0; i + static_cast<std::size_t>(keep_last) < all.size(); ++i) {
      fs::remove_all(all[i]);
    }
    fsync_directory(root);
  }
  return final_dir.string();
}

std::string save_checkpoint(const std::string& root, CheckpointManifest manifest,
                            std::span<const CheckpointFile> files, int keep_last) {
  const std::string staging = begin_checkpoint(root, manifest.step);
  manifest.files.clear();
  for (const CheckpointFile& f : files) {
    manifest.files.push_back(write_checkpoint_file(staging, f.name, f.tensors));
  }
  return commit_checkpoint(root, manifest, keep_last);
}

std::optional<std::string> latest_checkpoint(const std::string& root) {
  const fs::path latest = fs::path(root) / kLatest;
  std::error_code ec;
  if (!fs::exists(latest, ec)) return std::nullopt;
  std::string name = read_text(latest.string());
  if (!name.empty() && name.back() == '\n') name.pop_back();
  if (step_of(name) < 0) {
    throw InputError(latest.string(), "(contents)",
                     "expected a checkpoint directory name like \"step_00000100\", found \"" +
                         name.substr(0, 64) + "\"");
  }
  const fs::path dir = fs::path(root) / name;
  if (!fs::is_directory(dir, ec)) {
    throw InputError(latest.string(), "(contents)",
                     "names " + name + ", but " + dir.string() + " does not exist");
  }
  return dir.string();
}

std::vector<std::string> list_checkpoints(const std::string& root) {
  std::vector<std::pair<std::int64_t, std::string>> found;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return {};
  for (const auto& e : fs::directory_iterator(root)) {
    const std::int64_t s = step_of(e.path().filename().string());
    if (s >= 0 && e.is_directory()) found.emplace_back(s, e.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [s, p] : found) out.push_back(p);
  return out;
}

CheckpointReader::CheckpointReader(const std::string& dir) : dir_(dir) {
  const std::string manifest_path = (fs::path(dir) / kManifest).string();
  manifest_ = parse_manifest(read_text(manifest_path), manifest_path);
  // A directory's name is what listing and `latest` go by: a manifest of another step there
  // (a directory copied or renamed by hand) would resume at a step nobody asked for.
  if (const std::int64_t named = checkpoint_dir_step(dir); named >= 0 && named != manifest_.step) {
    throw InputError(manifest_path, "step",
                     "the manifest is of step " + std::to_string(manifest_.step) + ", but its directory " +
                         fs::path(dir).filename().string() + " is named for step " + std::to_string(named));
  }
  for (const ManifestFile& f : manifest_.files) {
    const std::string path = (fs::path(dir) / f.path).string();
    const auto [bytes, crc] = checksum_file(path);
    if (bytes != f.bytes) {
      throw InputError(path, "(size)",
                       "the manifest says " + std::to_string(f.bytes) + " bytes, found " +
                           std::to_string(bytes));
    }
    if (crc != f.crc32c) {
      throw InputError(path, "(checksum)",
                       "the manifest's CRC-32C is " + crc32c_text(f.crc32c) + ", the file's is " + crc32c_text(crc) +
                           "; the file is corrupted");
    }
    files_.emplace_back(path);
    const SafetensorsHeader& h = files_.back().header();
    std::set<std::string> in_file;
    for (const SafetensorsEntry& e : h.tensors) in_file.insert(e.name);
    const std::set<std::string> listed(f.tensors.begin(), f.tensors.end());
    if (in_file != listed) {
      std::string example;
      for (const auto& n : listed) if (!in_file.contains(n)) { example = "\"" + n + "\" is listed but not in the file"; break; }
      for (const auto& n : in_file) if (example.empty() && !listed.contains(n)) { example = "\"" + n + "\" is in the file but not listed"; break; }
      throw InputError(path, "(tensors)", "do not match the manifest's list: " + example);
    }
    for (const std::string& n : f.tensors) where_[n] = files_.size() - 1;
  }
}

std::vector<std::string> CheckpointReader::tensor_names() const {
  std::vector<std::string> out;
  for (const auto& [n, i] : where_) out.push_back(n);
  return out;
}

const SafetensorsEntry& CheckpointReader::entry(const std::string& name, std::size_t& file) const {
  auto it = where_.find(name);
  if (it == where_.end()) {
    throw InputError(dir_, "tensor \"" + name + "\"",
                     "not in this checkpoint (" + std::to_string(where_.size()) + " tensors in " +
                         std::to_string(files_.size()) + " files)");
  }
  file = it->second;
  return *files_[file].find(name);
}

std::vector<std::int64_t> CheckpointReader::shape(const std::string& name) const {
  std::size_t file = 0;
  return entry(name, file).shape;
}

void CheckpointReader::read(const std::string& name, std::span<float> out) const {
  std::size_t file = 0;
  entry(name, file);
  files_[file].read(name, out);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) {
      throw InputError(files_[file].path(), "tensor \"" + name + "\"",
                       "element " + std::to_string(i) + " is " + (std::isnan(out[i]) ? "NaN" : "infinite") +
                           "; a checkpoint holds finite values only (the file is damaged, or the run "
                           "that saved it had diverged)");
    }
  }
}

}  // namespace plait::checkpoint
