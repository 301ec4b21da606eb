#include "plait/checkpoint/checkpoint_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <cerrno>
#include <cstring>

#include "plait/core/atomic_file.h"
#include "plait/core/crc32c.h"
#include "plait/core/error.h"
#include "plait/core/printable_text.h"
#include "plait/core/progress.h"
#include "plait/core/unique_name.h"

namespace plait::checkpoint {
namespace fs = std::filesystem;
namespace {

constexpr const char* kManifest = "manifest.json";
constexpr const char* kLatest = "latest";
constexpr const char* kPartial = ".partial";

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

// A staging directory's name: "step_<digits>.partial-<run>", or the ".partial" of older plait.
bool is_staging_name(const std::string& name) {
  const std::size_t at = name.find(kPartial);
  return at != std::string::npos && step_of(name.substr(0, at)) >= 0;
}

std::string staging_name(std::int64_t step, const std::string& run) {
  check_plain_name(run, "checkpoint run");
  return checkpoint_dir_name(step) + kPartial + "-" + run;
}

// The CRC-32C and size of a whole open file, read in 1 MiB blocks.
std::pair<std::uint64_t, std::uint32_t> checksum_file(int fd, const std::string& path) {
  std::vector<std::byte> block(1 << 20);
  std::uint64_t bytes = 0;
  std::uint32_t crc = 0;
  for (;;) {
    const ssize_t got = ::pread(fd, block.data(), block.size(), static_cast<off_t>(bytes));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw InputError(path, "(file)", std::string("read error: ") + std::strerror(errno));
    if (got == 0) break;
    crc = crc32c(std::span(block.data(), static_cast<std::size_t>(got)), crc);
    bytes += static_cast<std::uint64_t>(got);
    note_progress();  // reading a large checkpoint is progress for the stall watchdog
  }
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

std::string new_checkpoint_run() { return unique_token(); }

std::string checkpoint_staging_dir(const std::string& root, std::int64_t step, const std::string& run) {
  return (fs::path(root) / staging_name(step, run)).string();
}

Directory create_checkpoint_root(const std::string& root) {
  std::error_code ec;
  if (fs::exists(root, ec) && !fs::is_directory(root, ec)) {
    throw InputError(root, "(checkpoint directory)", "is a file; checkpoints need a directory here");
  }
  fs::create_directories(root, ec);
  if (ec) throw InputError(root, "(checkpoint directory)", "cannot create it: " + ec.message());
  return Directory::open(root);
}

std::string begin_checkpoint(const std::string& root, std::int64_t step, const std::string& run) {
  if (step < 0) throw Error("checkpoint: step must be >= 0, found " + std::to_string(step));
  const Directory dir = create_checkpoint_root(root);
  const std::string name = staging_name(step, run);
  dir.remove_tree(name);  // this run's own, from an attempt that failed
  dir.make_child(name);
  dir.sync();
  return dir.path_of(name);
}

Directory open_checkpoint_staging(const std::string& staging_dir) {
  const fs::path p(staging_dir);
  const std::string parent = p.parent_path().string();
  return Directory::open(parent.empty() ? "." : parent).child(p.filename().string());
}

ManifestFile write_checkpoint_file(const std::string& staging_dir, const std::string& file_name,
                                   std::span<const TensorRef> tensors,
                                   const std::map<std::string, std::string>& metadata) {
  if (file_name.empty() || file_name.find('/') != std::string::npos || file_name == kManifest ||
      file_name == "." || file_name == "..") {
    throw Error("checkpoint: \"" + file_name + "\" is not a plain tensor file name");
  }
  const WrittenFile w = write_safetensors(open_checkpoint_staging(staging_dir), file_name, tensors, metadata, AtomicFile::Replace::kNever);
  ManifestFile f{file_name, w.bytes, w.crc32c, {}};
  for (const TensorRef& t : tensors) f.tensors.push_back(t.name);
  return f;
}

std::string commit_checkpoint(const std::string& root, const CheckpointManifest& manifest, const std::string& run,
                              int keep_last, const std::function<void()>& after_rename) {
  const std::string name = checkpoint_dir_name(manifest.step);
  const std::string staged = staging_name(manifest.step, run);
  const Directory dir = Directory::open(root);
  if (dir.kind_of(staged) == Directory::Kind::kMissing) {
    throw Error("checkpoint: " + dir.path_of(staged) + " does not exist; call begin_checkpoint first");
  }
  const Directory staging = dir.child(staged);
  // Round-trip the manifest through its parser: what we publish must be what we can load.
  const std::string text = manifest_to_text(manifest);
  parse_manifest(text, staging.path_of(kManifest));
  for (const ManifestFile& f : manifest.files) {
    struct stat st {};
    const bool there = ::fstatat(staging.fd(), f.path.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (!there || size != f.bytes) {
      throw Error("checkpoint: step " + std::to_string(manifest.step) + ": " + f.path +
                  (!there ? " was not written" : " has " + std::to_string(size) + " bytes, expected " +
                                                     std::to_string(f.bytes)));
    }
  }
  // (Replaced: the staging directory is this run's own, and a commit may be retried.)
  write_file_atomically(staging, kManifest, text);
  // Re-saving the step `latest` names is refused: for a moment there would be no complete
  // checkpoint. (A `latest` that is malformed or names a missing directory protects nothing; it
  // is replaced below.)
  std::optional<std::string> latest;
  try {
    latest = latest_checkpoint(root);
  } catch (const InputError&) {
  }
  if (latest && fs::path(*latest).filename() == name) {
    throw Error("checkpoint: step " + std::to_string(manifest.step) +
                " is the latest checkpoint; refusing to overwrite it");
  }
  // Never replaced: a step directory there now was written by another run (or set there by hand).
  dir.rename(staged, name, false);
  dir.sync();
  if (after_rename) after_rename();
  write_file_atomically(dir, kLatest, name + "\n");
  if (keep_last > 0) {
    std::vector<std::string> all = list_checkpoints(root);
    for (std::size_t i = 0; i + static_cast<std::size_t>(keep_last) < all.size(); ++i) {
      dir.remove_tree(fs::path(all[i]).filename().string());
    }
    dir.sync();
  }
  return dir.path_of(name);
}

std::vector<std::string> remove_abandoned_staging(const std::string& root) {
  std::vector<std::string> removed;
  const Directory dir = Directory::open(root);
  for (const std::string& n : dir.names()) {
    if (is_staging_name(n) || is_temporary_name(n)) {
      dir.remove_tree(n);
      removed.push_back(n);
    }
  }
  if (!removed.empty()) dir.sync();
  return removed;
}

std::string save_checkpoint(const std::string& root, CheckpointManifest manifest,
                            std::span<const CheckpointFile> files, int keep_last) {
  const std::string run = new_checkpoint_run();
  const std::string staging = begin_checkpoint(root, manifest.step, run);
  manifest.files.clear();
  for (const CheckpointFile& f : files) {
    manifest.files.push_back(write_checkpoint_file(staging, f.name, f.tensors));
  }
  return commit_checkpoint(root, manifest, run, keep_last);
}

std::optional<std::string> latest_checkpoint(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return std::nullopt;
  const Directory dir = Directory::open(root);
  if (dir.kind_of(kLatest) == Directory::Kind::kMissing) return std::nullopt;
  std::string name = dir.read_file(kLatest, 64);
  if (!name.empty() && name.back() == '\n') name.pop_back();
  if (step_of(name) < 0) {
    throw InputError(dir.path_of(kLatest), "(contents)",
                     "expected a checkpoint directory name like \"step_00000100\", found \"" +
                         printable_text(name, 24) + "\"");
  }
  const Directory::Kind kind = dir.kind_of(name);
  if (kind != Directory::Kind::kDirectory) {
    throw InputError(dir.path_of(kLatest), "(contents)",
                     "names " + name + ", but " + dir.path_of(name) +
                         (kind == Directory::Kind::kMissing ? " does not exist"
                          : kind == Directory::Kind::kLink  ? " is a symbolic link, not a checkpoint of plait's"
                                                            : " is not a directory"));
  }
  return dir.path_of(name);
}

std::vector<std::string> list_checkpoints(const std::string& root) {
  std::vector<std::pair<std::int64_t, std::string>> found;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return {};
  const Directory dir = Directory::open(root);
  for (const std::string& n : dir.names()) {
    const std::int64_t s = step_of(n);
    if (s >= 0 && dir.kind_of(n) == Directory::Kind::kDirectory) found.emplace_back(s, dir.path_of(n));
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [s, p] : found) out.push_back(p);
  return out;
}

CheckpointReader::CheckpointReader(const std::string& dir) : dir_(dir), handle_(Directory::open(dir)) {
  const std::string manifest_path = handle_.path_of(kManifest);
  constexpr std::size_t kMaxManifest = std::size_t{64} << 20;  // far above any real one
  manifest_ = parse_manifest(handle_.read_file(kManifest, kMaxManifest), manifest_path);
  // A directory's name is what listing and `latest` go by: a manifest of another step there
  // (a directory copied or renamed by hand) would resume at a step nobody asked for.
  if (const std::int64_t named = checkpoint_dir_step(dir); named >= 0 && named != manifest_.step) {
    throw InputError(manifest_path, "step",
                     "the manifest is of step " + std::to_string(manifest_.step) + ", but its directory " +
                         fs::path(dir).filename().string() + " is named for step " + std::to_string(named));
  }
  for (const ManifestFile& f : manifest_.files) {
    const std::string path = handle_.path_of(f.path);
    const int fd = handle_.open_file(f.path);
    std::pair<std::uint64_t, std::uint32_t> sum;
    try {
      sum = checksum_file(fd, path);
    } catch (...) {
      ::close(fd);
      throw;
    }
    const auto [bytes, crc] = sum;
    if (bytes != f.bytes || crc != f.crc32c) ::close(fd);
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
    SafetensorsReader file(fd, path);  // owns fd now
    files_.push_back(std::move(file));
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
