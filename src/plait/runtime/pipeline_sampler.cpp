#include "plait/runtime/pipeline_sampler.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include "plait/core/error.h"
#include "plait/core/progress.h"

namespace plait::runtime {
namespace {

// Message tags of a sample (no step's messages are in flight between steps).
constexpr int kActivationTag = 1;
constexpr int kTokenTag = 2;

}  // namespace

std::vector<std::int32_t> sample_through_pipeline(DistributedTrainer& trainer, comm::Communicator& world,
                                                  MemoryTracker& tracker, std::span<const std::int32_t> prompt,
                                                  int count, const SamplingOptions& options) {
  const PipelinePlan& plan = trainer.plan();
  const spec::ModelSpec& m = plan.model;
  const int rank = world.rank();
  const int stages = plan.num_vstages();
  if (prompt.empty() || count < 1 || static_cast<std::int64_t>(prompt.size()) + count > m.max_seq) {
    throw Error("sample: a prompt of " + std::to_string(prompt.size()) + " tokens and " + std::to_string(count) +
                " new ones; expected at least one of each within max_seq " + std::to_string(m.max_seq));
  }
  note_progress("sample: gathering the stages' weights");
  const std::vector<std::vector<float>> full = trainer.gather_parameters();
  const auto owner = [&](int v) { return plan.holders(v).front(); };
  // This rank's decoders: fp32 copies of the stages it is the lowest holder of.
  std::map<int, std::unique_ptr<model::StageModel>> decoders;
  const auto& mine = plan.schedule.layout.rank_vstages[static_cast<std::size_t>(rank)];
  for (std::size_t c = 0; c < mine.size(); ++c) {
    const int v = mine[c];
    if (owner(v) != rank) continue;
    model::StageSpec spec = plan.vstage_specs[static_cast<std::size_t>(v)];
    spec.precision = spec::Precision::fp32;
    spec.recompute_layers = 0;
    auto decoder = std::make_unique<model::StageModel>(m, spec, tracker);
    std::copy(full[c].begin(), full[c].end(), decoder->parameters().begin());
    decoder->begin_decode(static_cast<std::int64_t>(prompt.size()) + count);
    decoders.emplace(v, std::move(decoder));
  }
  const int last = stages - 1;
  std::vector<std::int32_t> sequence(prompt.begin(), prompt.end());
  std::vector<std::int32_t> drawn(static_cast<std::size_t>(count), 0);
  std::vector<float> in, out, logits;
  for (int i = 0; i < count; ++i) {
    note_progress("sample: token " + std::to_string(i + 1) + " of " + std::to_string(count));
    // The positions this step decodes: the prompt first, then the token drawn last.
    const int start = i == 0 ? 0 : static_cast<int>(prompt.size()) + i - 1;
    const int length = i == 0 ? static_cast<int>(prompt.size()) : 1;
    const std::size_t width = static_cast<std::size_t>(length) * m.hidden;
    if (i > 0 && owner(0) == rank && owner(last) != rank) {
      std::int32_t token = 0;
      world.irecv(std::span<std::int32_t>(&token, 1), owner(last), kTokenTag).wait();
      sequence.push_back(token);
    }
    for (int v = 0; v < stages; ++v) {
      if (owner(v) != rank) continue;
      model::StageModel& d = *decoders.at(v);
      if (v > 0 && owner(v - 1) != rank) {
        in.resize(width);
        world.irecv(std::span<float>(in), owner(v - 1), kActivationTag).wait();
      } else if (v > 0) {
        in.swap(out);  // the previous stage ran here
      }
      out.resize(width);
      if (v == last) logits.resize(static_cast<std::size_t>(length) * m.vocab);
      d.decode({0, start, length}, v > 0 ? in.data() : nullptr, v == 0 ? sequence.data() + start : nullptr,
               v == last ? nullptr : out.data(), v == last ? logits.data() : nullptr);
      if (v < last && owner(v + 1) != rank) {
        world.isend(std::span<const float>(out), owner(v + 1), kActivationTag).wait();
      }
      if (v == last) {
        const std::span<const float> row = std::span<const float>(logits).subspan(logits.size() - m.vocab);
        const std::int32_t token = sample_token(row, options, static_cast<std::uint64_t>(i));
        drawn[static_cast<std::size_t>(i)] = token;
        if (owner(0) != rank) {
          if (i + 1 < count) world.isend(std::span<const std::int32_t>(&token, 1), owner(0), kTokenTag).wait();
        } else {
          sequence.push_back(token);
        }
      }
    }
  }
  decoders.clear();
  note_progress("sample: sharing the tokens");
  world.broadcast(std::span<std::int32_t>(drawn), owner(last));
  return drawn;
}

}  // namespace plait::runtime
