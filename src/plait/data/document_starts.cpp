#include "plait/data/document_starts.h"

#include "plait/core/error.h"
#include "plait/core/progress.h"

namespace plait::data {

std::vector<std::int64_t> document_starts(const std::vector<ShardSetSource::File>& files, const ShardSetSource& source,
                                          std::optional<std::uint16_t> end_of_text) {
  if (files.size() != source.shards().size()) {
    throw Error("document starts: " + std::to_string(files.size()) + " files for a source of " +
                std::to_string(source.shards().size()) + " shards");
  }
  std::vector<std::int64_t> starts = {0};
  std::int64_t offset = 0;  // the shard's first token in the stream
  const auto add = [&](std::int64_t at) {
    if (at > starts.back()) starts.push_back(at);
  };
  for (std::size_t i = 0; i < files.size(); ++i) {
    const TokenShard& shard = source.shards()[i];
    const auto tokens = shard.tokens();
    if (files[i].documents) {
      note_progress("reading document index " + files[i].documents->path);
      const DocumentIndex index =
          read_document_index(*files[i].documents, static_cast<std::int64_t>(tokens.size()), shard.path());
      for (const std::uint32_t s : index.starts) add(offset + s);
    } else if (end_of_text) {
      for (std::size_t t = 0; t < tokens.size(); ++t) {
        if (tokens[t] == *end_of_text) add(offset + static_cast<std::int64_t>(t));
      }
    } else {
      throw InputError(shard.path(), "(document index)",
                       "no document index is recorded for it (no version 2 shard manifest beside it: an older "
                       "plait's or another tool's shard), and byte-level shards have no <|endoftext|> to find "
                       "documents by; prepare the corpus again with plait data prepare, or set data.packing to "
                       "\"stream\"");
    }
    offset += static_cast<std::int64_t>(tokens.size());
  }
  return starts;
}

}  // namespace plait::data
