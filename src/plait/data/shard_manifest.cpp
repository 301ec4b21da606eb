#include "plait/data/shard_manifest.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "plait/core/crc32c.h"
#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/core/printable_text.h"
#include "plait/data/document_index.h"

namespace plait::data {
namespace fs = std::filesystem;
namespace {

constexpr const char* kFormat = "plait-token-shards";
constexpr const char* kSuffix = ".shards.json";

std::string what_holds(const std::string& tokenizer) {
  return tokenizer == "gpt2" ? "GPT-2 BPE tokens (plait data prepare --tokenizer gpt2)"
                             : "byte tokens (plait data prepare --tokenizer byte)";
}

std::uint32_t checksum_field(const JsonFields& e) {
  std::uint32_t crc = 0;
  const std::string text = e.string("crc32c");
  if (!parse_crc32c_text(text, crc)) {
    e.fail("crc32c", "expected \"0x\" and 8 lower-case hex digits, found \"" + printable_text(text) + "\"");
  }
  return crc;
}

// A version 2 shard record's "documents": its index, named after the shard.
DocumentIndexRecord parse_index_record(const JsonFields& shard, const ShardRecord& r) {
  if (!shard.has("documents")) shard.fail("documents", "a version 2 manifest records each shard's document index");
  const JsonFields d = shard.object("documents");
  DocumentIndexRecord x;
  x.file = d.string("file");
  if (x.file != document_index_name(r.file)) {
    d.fail("file", "expected \"" + printable_text(document_index_name(r.file)) + "\" (the shard's index), found \"" +
                       printable_text(x.file) + "\"");
  }
  x.count = d.integer_in("count", 0, r.tokens);
  x.bytes = static_cast<std::uint64_t>(d.integer_in("bytes", 16, INT64_MAX));
  if (x.bytes != 16 + 4 * static_cast<std::uint64_t>(x.count)) {
    d.fail("bytes", "expected 16 + 4 x count = " + std::to_string(16 + 4 * x.count) + ", found " + std::to_string(x.bytes));
  }
  x.crc32c = checksum_field(d);
  d.check_no_unknown_fields();
  return x;
}

}  // namespace

const ShardRecord* ShardManifest::find(const std::string& file) const {
  for (const ShardRecord& r : shards) {
    if (r.file == file) return &r;
  }
  return nullptr;
}

std::string shard_manifest_to_text(const ShardManifest& m) {
  nlohmann::ordered_json shards = nlohmann::ordered_json::array();
  std::size_t indexed = 0;
  for (const ShardRecord& r : m.shards) {
    nlohmann::ordered_json e = {{"file", r.file}, {"split", r.split}, {"tokens", r.tokens}, {"bytes", r.bytes},
                                {"crc32c", crc32c_text(r.crc32c)}};
    if (r.documents) {
      ++indexed;
      e["documents"] = {{"file", r.documents->file}, {"count", r.documents->count}, {"bytes", r.documents->bytes},
                        {"crc32c", crc32c_text(r.documents->crc32c)}};
    }
    shards.push_back(std::move(e));
  }
  if (indexed != 0 && indexed != m.shards.size()) {
    throw Error("shard manifest: " + std::to_string(indexed) + " of " + std::to_string(m.shards.size()) +
                " shards have a document index; version 2 records one for every shard");
  }
  nlohmann::ordered_json j;
  j["format"] = kFormat;
  j["version"] = indexed != 0 ? 2 : 1;
  j["tokenizer"] = m.tokenizer;
  j["vocab_size"] = m.vocab_size;
  j["shards"] = shards;
  return j.dump(1) + "\n";
}

ShardManifest parse_shard_manifest(std::string_view text, const std::string& file) {
  const nlohmann::json j = parse_json_text(text, file);
  const JsonFields f(j, file);
  if (const std::string format = f.string("format"); format != kFormat) {
    f.fail("format", "expected \"plait-token-shards\", found \"" + printable_text(format) + "\"");
  }
  const std::int64_t version = f.integer_in("version", 1, 2);
  ShardManifest m;
  m.tokenizer = f.string("tokenizer");
  if (m.tokenizer != "byte" && m.tokenizer != "gpt2") {
    f.fail("tokenizer", "expected \"byte\" or \"gpt2\", found \"" + printable_text(m.tokenizer) + "\"");
  }
  m.vocab_size = static_cast<int>(f.integer_in("vocab_size", 1, 65536));
  const nlohmann::json& shards = f.raw("shards");
  if (!shards.is_array()) f.fail("shards", "expected an array of shard records");
  std::set<std::string> seen;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const JsonFields e(shards[i], file, "shards[" + std::to_string(i) + "]");
    ShardRecord r;
    r.file = e.string("file");
    if (r.file.empty() || r.file == "." || r.file == ".." || r.file.find('/') != std::string::npos ||
        r.file.find('\0') != std::string::npos) {
      e.fail("file", "expected a plain file name in the manifest's directory, found \"" + printable_text(r.file) + "\"");
    }
    if (!seen.insert(r.file).second) e.fail("file", "\"" + printable_text(r.file) + "\" is listed twice");
    r.split = e.string("split");
    if (r.split != "train" && r.split != "val") {
      e.fail("split", "expected \"train\" or \"val\", found \"" + printable_text(r.split) + "\"");
    }
    r.tokens = e.integer_in("tokens", 0, 2147483647);
    r.bytes = static_cast<std::uint64_t>(e.integer_in("bytes", 1024, INT64_MAX));
    if (r.bytes != 1024 + 2 * static_cast<std::uint64_t>(r.tokens)) {
      e.fail("bytes", "expected 1024 + 2 x tokens = " + std::to_string(1024 + 2 * r.tokens) + ", found " +
                          std::to_string(r.bytes));
    }
    r.crc32c = checksum_field(e);
    if (version == 2) r.documents = parse_index_record(e, r);
    e.check_no_unknown_fields();
    m.shards.push_back(std::move(r));
  }
  f.check_no_unknown_fields();
  return m;
}

void write_shard_manifest(const Directory& dir, const std::string& name, const ShardManifest& m,
                          AtomicFile::Replace replace) {
  write_file_atomically(dir, name, shard_manifest_to_text(m), replace);
}

void write_shard_manifest(const std::string& path, const ShardManifest& m) {
  write_file_atomically(path, shard_manifest_to_text(m));
}

std::string shard_corpus_name(const std::string& shard_file) {
  const std::string name = fs::path(shard_file).filename().string();
  for (const char* split : {"_train", "_val"}) {
    const std::size_t at = name.rfind(split);
    if (at == std::string::npos || at == 0) continue;
    const std::string rest = name.substr(at + std::strlen(split));
    if (rest == ".bin" || (rest.size() > 5 && rest[0] == '_' && rest.ends_with(".bin"))) return name.substr(0, at);
  }
  return "";
}

std::string shard_manifest_path(const std::string& shard_file) {
  const std::string name = shard_corpus_name(shard_file);
  if (name.empty()) return "";
  return (fs::path(shard_file).parent_path() / (name + kSuffix)).string();
}

std::vector<ShardSetSource::File> shards_to_read(const std::string& path, const std::string& split,
                                        const std::string& tokenizer, const std::string& declared_in) {
  const std::vector<std::string> files = find_token_shards(path, split);
  std::map<std::string, std::optional<ShardManifest>> manifests;  // by manifest path
  std::vector<ShardSetSource::File> out;
  for (const std::string& f : files) {
    ShardSetSource::File s{f, std::nullopt, std::nullopt};
    const std::string mpath = shard_manifest_path(f);
    if (!mpath.empty()) {
      auto [it, fresh] = manifests.try_emplace(mpath);
      if (fresh && fs::is_regular_file(mpath)) {
        std::ifstream in(mpath, std::ios::binary);
        std::stringstream text;
        text << in.rdbuf();
        it->second = parse_shard_manifest(text.str(), mpath);
        if (it->second->tokenizer != tokenizer) {
          throw InputError(mpath, "tokenizer",
                           "the shards hold " + what_holds(it->second->tokenizer) + ", but " + declared_in +
                               " declares \"" + tokenizer + "\"; reading them as " + tokenizer +
                               " tokens would train on nonsense");
        }
        // Every shard of this split the manifest lists must be there: the stream is their
        // concatenation in name order.
        for (const ShardRecord& r : it->second->shards) {
          const std::string p = (fs::path(mpath).parent_path() / r.file).string();
          if (r.split == split && !fs::is_regular_file(p)) {
            throw InputError(mpath, "shards", r.file + " is listed but missing from " +
                                                  fs::path(mpath).parent_path().string());
          }
        }
      }
      if (it->second) {
        const ShardRecord* r = it->second->find(fs::path(f).filename().string());
        if (r == nullptr || r->split != split) {
          throw InputError(f, "(file)", "not listed in " + mpath + " (as a " + split +
                                            " shard): it was not written by that plait data prepare; "
                                            "prepare the corpus again or move the stray file");
        }
        s.checksum = ShardChecksum{r->crc32c, mpath};
        if (r->documents) {
          s.documents = DocumentIndexFile{(fs::path(mpath).parent_path() / r->documents->file).string(),
                                          r->documents->crc32c, mpath};
        }
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace plait::data
