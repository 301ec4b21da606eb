#pragma once
// llm.c-style sequential batches from a token stream (llm.c llmc/dataloader.h: row b of a batch
// reads T+1 tokens at current_position + b*T), with a resumable position and data-parallel,
// heterogeneous splitting.
//
// Sample n of the run is the window of seq+1 tokens starting at token (n mod S) * seq, where
// S = floor((N - 1) / seq) is the number of windows in a stream of N tokens: consecutive windows
// overlap by one token (the last target of one is the first input of the next), windows may run
// across shard boundaries, and after S samples the stream starts over (a new epoch, same order).
// inputs = window[0..seq), targets = window[1..seq].
//
// Step s has M = microbatches_per_step() global micro-batches of B rows. With the loader
// started at DataPosition {step s0, sample n0}, row b of global micro-batch g of step s is sample
//   n0 + ((s - s0) * M + g) * B + b,
// so the position is all there is to save, and a run resumed with other replica shares or
// another micro-batch count continues the stream exactly where it stopped.
//
// With `packing` (data.packing "documents", packed_sequences.h), sample n is packed sequence
// n mod S instead, S the number of packed sequences: its document tokens, then padding
// (kPaddingInput, with target kPaddingTarget); documents() tells where its documents start.
//
// With balance (data.balance "wlb", balanced_order.h) the packed sequences of each window of
// `window_steps` x M x B consecutive samples are reordered so that every micro-batch of the
// window carries about the same attention work: sample n reads the sequence the window's order
// gives it. Windows are counted from sample 0, and the order is a pure function of the window,
// so the state (which records the window and B) is still all a resume needs.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plait/data/batch_source.h"
#include "plait/data/microbatch_shares.h"
#include "plait/data/packed_sequences.h"
#include "plait/data/token_source.h"

namespace plait::data {

// Where the data stream stands at the start of `step`: `sample` samples consumed so far.
struct DataPosition {
  std::int64_t step = 0;
  std::int64_t sample = 0;
  bool operator==(const DataPosition&) const = default;
};

// data.balance: "wlb" reorders packed sequences in windows of `window_steps` steps
// (balanced_order.h); 0 steps: the packing's order.
struct SequenceBalance {
  int window_steps = 0;
  bool on() const { return window_steps > 0; }
};

// How a balanced loader cuts its windows (what its state records and a resume must match):
// samples per window, rows per micro-batch, micro-batches per step. All 0 without balance.
struct BalanceLayout {
  std::int64_t window = 0;
  int rows = 0;
  int microbatches = 0;
  bool operator==(const BalanceLayout&) const = default;
};

class SequentialLoader : public BatchSource {
 public:
  // source (and packing, if given: its sequences of this seq, over this source) must outlive
  // the loader; the source holds at least seq + 1 tokens.
  SequentialLoader(const TokenSource& source, int seq, int microbatch_size,
                   MicrobatchShares shares, DataPosition start = {},
                   const PackedSequences* packing = nullptr, SequenceBalance balance = {});

  // BatchSource: `microbatch` is the global index in [0, shares().total()); step >= start step.
  void fill(std::int64_t step, int microbatch, std::int32_t* inputs,
            std::int32_t* targets) const override;
  int seq() const override { return seq_; }
  int microbatch_size() const override { return microbatch_size_; }
  int microbatches_per_step() const override { return shares_.total(); }
  std::vector<SequenceDocuments> documents(std::int64_t step, int microbatch) const override;

  // Replica r's local micro-batch `local` of step `step` (= fill with the global index).
  void fill_local(std::int64_t step, int replica, int local, std::int32_t* inputs,
                  std::int32_t* targets) const;
  // One row: sample n's inputs and targets (seq each).
  void fill_sample(std::int64_t sample, std::int32_t* inputs, std::int32_t* targets) const;

  std::int64_t sample_index(std::int64_t step, int microbatch, int row) const;
  std::int64_t window_start(std::int64_t sample) const;  // first token of sample's window
  // The documents of sample n (one of seq tokens without packing).
  SequenceDocuments sample_documents(std::int64_t sample) const;
  std::int64_t samples_per_epoch() const { return samples_per_epoch_; }
  // The packed sequence (or stream window) sample n reads: n mod S, or with balance the one its
  // window's order gives position n.
  std::int64_t sequence_of(std::int64_t sample) const;
  // Samples per balanced window (0 without balance).
  std::int64_t balance_window() const { return balance_window_; }
  BalanceLayout balance_layout() const;
  const MicrobatchShares& shares() const { return shares_; }

  // The position at the start of `step` (what a checkpoint taken before `step` records).
  DataPosition position(std::int64_t step) const;

  // A checkpointable state: the position plus what it assumes (seq, stream length; with
  // packing, "packing": "documents" and the layout: documents, sequences, layout_crc32c), so a
  // resume against other data, another sequence length or another packing fails clearly
  // instead of silently reading different windows.
  nlohmann::json state(std::int64_t step) const;
  // Parses a state written by state() and checks it against the seq, stream and packing of the
  // run that resumes; errors name `file` and the field. Returns the position to start the loader
  // at.
  // `balance`: the resuming run's (balance_layout()), which must be the state's.
  static DataPosition position_from_state(const nlohmann::json& state, const TokenSource& source,
                                          int seq, const std::string& file,
                                          const PackedSequences* packing = nullptr,
                                          const BalanceLayout& balance = {});

 private:
  const TokenSource* source_;
  int seq_;
  int microbatch_size_;
  MicrobatchShares shares_;
  DataPosition start_;
  const PackedSequences* packing_;
  std::int64_t samples_per_epoch_;
  std::int64_t balance_window_ = 0;
  std::vector<double> work_;  // attention work of each packed sequence (with balance)
  // Orders of the windows read lately, by window index (a pure function of the window; shared by
  // copies of the loader).
  struct WindowOrders {
    std::mutex mutex;
    std::map<std::int64_t, std::vector<std::int64_t>> orders;
  };
  std::shared_ptr<WindowOrders> orders_ = std::make_shared<WindowOrders>();
};

// Validation on held-out data every `every_steps` steps (and on the last step): the first
// `microbatches` global micro-batches of the held-out stream, split over replicas by `shares`.
// The same micro-batches every time, so successive validation losses are comparable (llm.c
// resets its validation loader the same way).
class ValidationSet {
 public:
  ValidationSet(const TokenSource& held_out, int seq, int microbatch_size,
                MicrobatchShares shares, int every_steps, const PackedSequences* packing = nullptr);
  // Whether validation runs at step `step` (before its update) of a run whose last step is
  // `last_step`: step 0, every every_steps-th step and the last, as llm.c does.
  bool due(std::int64_t step, std::int64_t last_step) const;
  const SequentialLoader& loader() const { return loader_; }
  int microbatches() const { return loader_.microbatches_per_step(); }
  // Global validation micro-batch g in [0, microbatches()).
  void fill(int microbatch, std::int32_t* inputs, std::int32_t* targets) const {
    loader_.fill(0, microbatch, inputs, targets);
  }

 private:
  SequentialLoader loader_;
  int every_steps_;
};

}  // namespace plait::data
