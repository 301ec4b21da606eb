#include "plait/runtime/generation.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "plait/core/error.h"
#include "plait/core/monotonic_clock.h"
#include "plait/core/splitmix64.h"

namespace plait::runtime {

int sample_token(std::span<const float> logits, const SamplingOptions& o, std::uint64_t draw) {
  if (logits.empty()) throw Error("sampling: no logits");
  if (!(o.temperature >= 0) || o.top_k < 0 || !(o.top_p > 0 && o.top_p <= 1)) {
    throw Error("sampling: expected temperature >= 0, top-k >= 0 and top-p in (0, 1]");
  }
  if (o.temperature == 0) {
    return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  // Tokens by decreasing logit (ties by id, so the order is deterministic), cut to top-k.
  std::vector<int> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const std::size_t k = o.top_k > 0 ? std::min<std::size_t>(static_cast<std::size_t>(o.top_k), order.size()) : order.size();
  const auto by_logit = [&](int a, int b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; };
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), by_logit);
  order.resize(k);
  // Softmax of logit / T over the kept tokens, in double, shifted by the largest.
  std::vector<double> p(k);
  const double top = logits[order[0]];
  double sum = 0;
  for (std::size_t i = 0; i < k; ++i) sum += p[i] = std::exp((logits[order[i]] - top) / o.temperature);
  // Nucleus: the shortest prefix whose probability reaches top_p.
  std::size_t kept = k;
  if (o.top_p < 1) {
    double mass = 0;
    for (std::size_t i = 0; i < k; ++i) {
      mass += p[i] / sum;
      if (mass >= o.top_p) {
        kept = i + 1;
        break;
      }
    }
  }
  const double total = std::accumulate(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(kept), 0.0);
  // A uniform number in [0, 1) from 53 bits of splitmix64(seed, draw).
  const double u = static_cast<double>(splitmix64(o.seed ^ splitmix64(draw)) >> 11) * 0x1p-53 * total;
  double cdf = 0;
  for (std::size_t i = 0; i < kept; ++i) {
    cdf += p[i];
    if (u < cdf) return order[i];
  }
  return order[kept - 1];
}

Generation generate(model::StageModel& model, std::span<const std::int32_t> prompt, int count,
                    const SamplingOptions& options, bool use_cache, bool keep_logits) {
  const spec::ModelSpec& m = model.config();
  if (!model.spec().has_embedding || !model.spec().has_head) {
    throw Error("generate: the model must be whole (one stage with the embedding and the head)");
  }
  if (prompt.empty()) throw InputError("--prompt", "(tokens)", "the prompt must hold at least one token");
  if (count < 0 || static_cast<std::int64_t>(prompt.size()) + count > m.max_seq) {
    throw InputError("--tokens", "(length)",
                     "a prompt of " + std::to_string(prompt.size()) + " tokens and " + std::to_string(count) +
                         " new ones exceed the model's max_seq " + std::to_string(m.max_seq));
  }
  Generation g;
  std::vector<std::int32_t> sequence(prompt.begin(), prompt.end());
  std::vector<float> logits;
  const std::size_t v = static_cast<std::size_t>(m.vocab);
  // The last position's logits of a decode of [start, end).
  const auto decode = [&](int start, int end) {
    logits.resize(static_cast<std::size_t>(end - start) * v);
    model.decode({0, start, end - start}, nullptr, sequence.data() + start, nullptr, logits.data());
    return std::span<const float>(logits).subspan(logits.size() - v);
  };
  double t0 = monotonic_seconds();
  std::span<const float> last;
  if (use_cache && count > 0) {
    model.begin_decode(static_cast<std::int64_t>(prompt.size()) + count);
    last = decode(0, static_cast<int>(prompt.size()));
    g.prompt_seconds = monotonic_seconds() - t0;
    t0 = monotonic_seconds();
  }
  for (int i = 0; i < count; ++i) {
    const int length = static_cast<int>(sequence.size());
    if (!use_cache) {
      model.begin_decode(length);
      last = decode(0, length);
    } else if (i > 0) {
      last = decode(length - 1, length);
    }
    if (keep_logits) g.logits.emplace_back(last.begin(), last.end());
    const int next = sample_token(last, options, static_cast<std::uint64_t>(i));
    g.tokens.push_back(next);
    sequence.push_back(next);
  }
  g.decode_seconds = monotonic_seconds() - t0;
  model.end_decode();
  return g;
}

}  // namespace plait::runtime
