#include "plait/data/sequential_loader.h"

#include <vector>

#include "plait/core/error.h"
#include "plait/core/crc32c.h"
#include "plait/core/json_fields.h"
#include "plait/core/printable_text.h"
#include "plait/data/balanced_order.h"

namespace plait::data {
namespace {

// A packed run's state names its layout; the resuming run's must be the same one.
void check_packing(const JsonFields& f, const PackedSequences& packing) {
  const std::int64_t documents = f.integer("documents");
  const std::int64_t sequences = f.integer("sequences");
  const std::string crc = f.string("layout_crc32c");
  const std::string crc_now = crc32c_text(packing.layout_crc32c());
  if (documents != packing.document_count() || sequences != packing.size() || crc != crc_now) {
    f.fail("layout_crc32c", "the checkpoint's run packed " + std::to_string(documents) + " documents into " +
                                std::to_string(sequences) + " sequences (layout " + printable_text(crc, 12) +
                                "), this run packs " + std::to_string(packing.document_count()) + " into " +
                                std::to_string(packing.size()) + " (layout " + crc_now +
                                "); resuming would read other sequences");
  }
}

}  // namespace

SequentialLoader::SequentialLoader(const TokenSource& source, int seq, int microbatch_size,
                                   MicrobatchShares shares, DataPosition start,
                                   const PackedSequences* packing, SequenceBalance balance)
    : source_(&source),
      seq_(seq),
      microbatch_size_(microbatch_size),
      shares_(std::move(shares)),
      start_(start),
      packing_(packing) {
  if (seq <= 0 || microbatch_size <= 0) {
    throw Error("sequential loader: seq and micro-batch size must be positive, found " +
                std::to_string(seq) + " and " + std::to_string(microbatch_size));
  }
  if (start.step < 0 || start.sample < 0) {
    throw Error("sequential loader: the start position must be >= 0, found step " +
                std::to_string(start.step) + ", sample " + std::to_string(start.sample));
  }
  if (source.size() < static_cast<std::int64_t>(seq) + 1) {
    throw Error("sequential loader: " + source.describe() + " has fewer than seq + 1 = " +
                std::to_string(seq + 1) + " tokens");
  }
  samples_per_epoch_ = (source.size() - 1) / seq;
  if (packing) {
    if (packing->seq() != seq || packing->stream_tokens() != source.size()) {
      throw Error("sequential loader: sequences packed for seq " + std::to_string(packing->seq()) + " over " +
                  std::to_string(packing->stream_tokens()) + " tokens, but the loader has seq " + std::to_string(seq) +
                  " over " + source.describe());
    }
    samples_per_epoch_ = packing->size();
  }
  if (balance.on()) {
    if (!packing) throw Error("sequential loader: balancing reorders packed sequences; it needs documents packing");
    balance_window_ = std::int64_t{balance.window_steps} * shares_.total() * microbatch_size_;
    work_.reserve(static_cast<std::size_t>(samples_per_epoch_));
    for (std::int64_t i = 0; i < samples_per_epoch_; ++i) {
      work_.push_back(sequence_attention_work(packing->documents(i), seq));
    }
  }
}

BalanceLayout SequentialLoader::balance_layout() const {
  if (balance_window_ == 0) return {};
  return {balance_window_, microbatch_size_, shares_.total()};
}

std::int64_t SequentialLoader::sequence_of(std::int64_t sample) const {
  if (balance_window_ == 0) return sample % samples_per_epoch_;
  const std::int64_t window = sample / balance_window_;
  const std::int64_t first = window * balance_window_;
  std::lock_guard<std::mutex> lock(orders_->mutex);
  std::map<std::int64_t, std::vector<std::int64_t>>& orders = orders_->orders;
  auto it = orders.find(window);
  if (it == orders.end()) {
    std::vector<double> work(static_cast<std::size_t>(balance_window_));
    for (std::int64_t j = 0; j < balance_window_; ++j) work[j] = work_[(first + j) % samples_per_epoch_];
    if (orders.size() >= 4) orders.erase(orders.begin());  // steps move forward: keep a few
    it = orders.emplace(window, balanced_window_order(work, microbatch_size_, shares_.total())).first;
  }
  return (first + it->second[sample - first]) % samples_per_epoch_;
}

std::int64_t SequentialLoader::sample_index(std::int64_t step, int microbatch, int row) const {
  if (step < start_.step) {
    throw Error("sequential loader: step " + std::to_string(step) +
                " is before the loader's start step " + std::to_string(start_.step));
  }
  if (microbatch < 0 || microbatch >= shares_.total()) {
    throw Error("sequential loader: step " + std::to_string(step) + ": micro-batch " +
                std::to_string(microbatch) + " outside [0, " + std::to_string(shares_.total() - 1) +
                "]");
  }
  const std::int64_t per_step = static_cast<std::int64_t>(shares_.total()) * microbatch_size_;
  return start_.sample + (step - start_.step) * per_step +
         static_cast<std::int64_t>(microbatch) * microbatch_size_ + row;
}

std::int64_t SequentialLoader::window_start(std::int64_t sample) const {
  if (packing_) return packing_->at(sequence_of(sample)).start;
  return (sample % samples_per_epoch_) * seq_;
}

void SequentialLoader::fill_sample(std::int64_t sample, std::int32_t* inputs,
                                   std::int32_t* targets) const {
  const int tokens = packing_ ? packing_->at(sequence_of(sample)).tokens : seq_;
  std::vector<std::uint16_t> window(static_cast<std::size_t>(tokens) + 1);
  source_->read(window_start(sample), window);
  for (int t = 0; t < tokens; ++t) {
    inputs[t] = window[t];
    targets[t] = window[t + 1];
  }
  for (int t = tokens; t < seq_; ++t) {
    inputs[t] = kPaddingInput;
    targets[t] = kPaddingTarget;
  }
}

SequenceDocuments SequentialLoader::sample_documents(std::int64_t sample) const {
  if (!packing_) return {{0}, seq_, false};
  return packing_->documents(sequence_of(sample));
}

std::vector<SequenceDocuments> SequentialLoader::documents(std::int64_t step, int microbatch) const {
  std::vector<SequenceDocuments> out;
  for (int b = 0; b < microbatch_size_; ++b) out.push_back(sample_documents(sample_index(step, microbatch, b)));
  return out;
}

void SequentialLoader::fill(std::int64_t step, int microbatch, std::int32_t* inputs,
                            std::int32_t* targets) const {
  for (int b = 0; b < microbatch_size_; ++b) {
    fill_sample(sample_index(step, microbatch, b), inputs + b * seq_, targets + b * seq_);
  }
}

void SequentialLoader::fill_local(std::int64_t step, int replica, int local,
                                  std::int32_t* inputs, std::int32_t* targets) const {
  fill(step, shares_.global_index(replica, local), inputs, targets);
}

DataPosition SequentialLoader::position(std::int64_t step) const {
  if (step < start_.step) {
    throw Error("sequential loader: step " + std::to_string(step) +
                " is before the loader's start step " + std::to_string(start_.step));
  }
  return {step, start_.sample + (step - start_.step) * shares_.total() * microbatch_size_};
}

nlohmann::json SequentialLoader::state(std::int64_t step) const {
  const DataPosition p = position(step);
  nlohmann::json s = {{"step", p.step}, {"sample", p.sample}, {"seq", seq_}, {"stream_tokens", source_->size()}};
  if (packing_) {
    s["packing"] = "documents";
    s["documents"] = packing_->document_count();
    s["sequences"] = packing_->size();
    s["layout_crc32c"] = crc32c_text(packing_->layout_crc32c());
  }
  if (balance_window_ > 0) {
    s["balance"] = "wlb";
    s["balance_window"] = balance_window_;
    s["balance_rows"] = microbatch_size_;
    s["balance_microbatches"] = shares_.total();
  }
  return s;
}

DataPosition SequentialLoader::position_from_state(const nlohmann::json& state,
                                                   const TokenSource& source, int seq_now,
                                                   const std::string& file, const PackedSequences* packing,
                                                   const BalanceLayout& balance_now) {
  const JsonFields f(state, file, "data_position");
  const DataPosition p{f.integer_in("step", 0, INT64_MAX), f.integer_in("sample", 0, INT64_MAX)};
  const std::int64_t seq = f.integer("seq");
  const std::int64_t tokens = f.integer("stream_tokens");
  const std::string packed = f.string("packing", "stream");
  const std::string mode_now = packing ? "documents" : "stream";
  if (packed != mode_now) {
    f.fail("packing", "the checkpoint's run read \"" + printable_text(packed, 20) + "\" sequences, this run reads \"" +
                          mode_now + "\" (data.packing); resuming would read other sequences");
  }
  if (packing) check_packing(f, *packing);
  // A balanced run's windows must be cut alike, or the same sample would read another sequence.
  const std::string balance = f.string("balance", "none");
  const std::string mode = balance_now.window > 0 ? "wlb" : "none";
  if (balance != mode) {
    f.fail("balance", "the checkpoint's run ordered its sequences by \"" + printable_text(balance, 20) +
                          "\", this run by \"" + mode + "\" (data.balance); resuming would read other sequences");
  }
  if (balance_now.window > 0) {
    const BalanceLayout then{f.integer("balance_window"), static_cast<int>(f.integer("balance_rows")),
                             static_cast<int>(f.integer("balance_microbatches"))};
    auto text = [](const BalanceLayout& b) {
      return std::to_string(b.window) + " samples, " + std::to_string(b.microbatches) + " micro-batches of " +
             std::to_string(b.rows) + " rows a step";
    };
    if (then != balance_now) {
      f.fail("balance_window", "the checkpoint's run balanced windows of " + text(then) + ", this run of " +
                                   text(balance_now) +
                                   " (data.balance_window, train.microbatches, train.microbatch_size); resuming "
                                   "would read other sequences");
    }
  }
  f.check_no_unknown_fields();
  if (seq != seq_now) {
    f.fail("seq", "the checkpoint was taken with seq " + std::to_string(seq) +
                      ", this run has seq " + std::to_string(seq_now) +
                      "; resuming would read other windows");
  }
  if (tokens != source.size()) {
    f.fail("stream_tokens", "the checkpoint's data stream had " + std::to_string(tokens) +
                                " tokens, this run's has " + std::to_string(source.size()) +
                                " (" + source.describe() + "); is it the same data?");
  }
  return p;
}

ValidationSet::ValidationSet(const TokenSource& held_out, int seq, int microbatch_size,
                             MicrobatchShares shares, int every_steps, const PackedSequences* packing)
    : loader_(held_out, seq, microbatch_size, std::move(shares), {}, packing), every_steps_(every_steps) {
  if (every_steps <= 0) {
    throw Error("validation: expected a positive interval in steps, found " +
                std::to_string(every_steps));
  }
}

bool ValidationSet::due(std::int64_t step, std::int64_t last_step) const {
  return step % every_steps_ == 0 || step == last_step;
}

}  // namespace plait::data
