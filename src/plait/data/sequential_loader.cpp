#include "plait/data/sequential_loader.h"

#include <vector>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"

namespace plait::data {

SequentialLoader::SequentialLoader(const TokenSource& source, int seq, int microbatch_size,
                                   MicrobatchShares shares, DataPosition start)
    : source_(&source),
      seq_(seq),
      microbatch_size_(microbatch_size),
      shares_(std::move(shares)),
      start_(start) {
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
  return (sample % samples_per_epoch_) * seq_;
}

void SequentialLoader::fill_sample(std::int64_t sample, std::int32_t* inputs,
                                   std::int32_t* targets) const {
  std::vector<std::uint16_t> window(static_cast<std::size_t>(seq_) + 1);
  source_->read(window_start(sample), window);
  for (int t = 0; t < seq_; ++t) {
    inputs[t] = window[t];
    targets[t] = window[t + 1];
  }
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
  return {{"step", p.step},
          {"sample", p.sample},
          {"seq", seq_},
          {"stream_tokens", source_->size()}};
}

DataPosition SequentialLoader::position_from_state(const nlohmann::json& state,
                                                   const TokenSource& source, int seq_now,
                                                   const std::string& file) {
  const JsonFields f(state, file, "data_position");
  const DataPosition p{f.integer_in("step", 0, INT64_MAX), f.integer_in("sample", 0, INT64_MAX)};
  const std::int64_t seq = f.integer("seq");
  const std::int64_t tokens = f.integer("stream_tokens");
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
                             MicrobatchShares shares, int every_steps)
    : loader_(held_out, seq, microbatch_size, std::move(shares)), every_steps_(every_steps) {
  if (every_steps <= 0) {
    throw Error("validation: expected a positive interval in steps, found " +
                std::to_string(every_steps));
  }
}

bool ValidationSet::due(std::int64_t step, std::int64_t last_step) const {
  return step % every_steps_ == 0 || step == last_step;
}

}  // namespace plait::data
