// Packed documents (issue 24): a micro-batch whose rows are packed from documents, with its
// document mask set (StageModel::set_documents), trains to the loss and every parameter gradient
// of its documents run one by one, each alone as a sequence of its own -- attention kept inside
// each document, positions (GPT-2's learned ones, LLaMA's rotary ones) restarting at each
// document, the padding's targets (kNoTarget) counting nothing -- for both families; also cut
// into Seq1F1B segments whose boundaries fall inside documents (documents straddling segments,
// segments starting mid-document), with the split backward, with recomputed layers, and over two
// pipeline stages.
//
// Metric (segment_equivalence_test.cpp's): per tensor max |g - g_ref| / max |g_ref| <= 1e-5, and
// |loss - loss_ref| / loss_ref <= 1e-6; the loss is normalised by the same count (the targets that
// count) on both sides. The differences are fp32 reassociation: attention's key tiles are
// anchored differently in a row and in a document alone, and the parameter gradients sum the
// documents' tokens in another order.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "plait/core/error.h"
#include "plait/core/memory_tracker.h"
#include "plait/kernels/cross_entropy.h"
#include "tiny_model.h"

namespace plait::model {
namespace {

using namespace plait::model::testing;

class PackedDocuments : public FamilyTest {};

constexpr double kGradientTolerance = 1e-5;
constexpr double kLossTolerance = 1e-6;
constexpr std::uint64_t kSeed = 7;

// Rows of `seq` positions packed from documents: row b's documents start at starts[b] (the first
// at 0) and end at tokens[b], the rest padding (input 0, target kNoTarget).
struct Packing {
  int seq;
  std::vector<std::vector<int>> starts;
  std::vector<int> tokens;
  int rows() const { return static_cast<int>(starts.size()); }
  // The document mask (kernels/attention.h): where each position's document starts; the padding
  // is one more document.
  std::vector<std::int32_t> mask() const {
    std::vector<std::int32_t> out;
    for (int b = 0; b < rows(); ++b) {
      for (int p = 0, j = 0; p < seq; ++p) {
        if (p >= tokens[b]) {
          out.push_back(tokens[b]);
          continue;
        }
        while (j + 1 < static_cast<int>(starts[b].size()) && starts[b][j + 1] <= p) ++j;
        out.push_back(starts[b][j]);
      }
    }
    return out;
  }
  int counted() const {
    int n = 0;
    for (int t : tokens) n += t;
    return n;
  }
};

Batch packed_batch(const Packing& pk, int vocab) {
  Batch b = random_batch(pk.rows(), pk.seq, vocab, 5);
  for (int r = 0; r < pk.rows(); ++r) {
    for (int p = pk.tokens[r]; p < pk.seq; ++p) {
      b.tokens[static_cast<std::size_t>(r) * pk.seq + p] = 0;
      b.targets[static_cast<std::size_t>(r) * pk.seq + p] = kernels::kNoTarget;
    }
  }
  return b;
}

struct Trained {
  double loss;
  std::vector<float> gradients;
};

// The documents one by one: each its own micro-batch of one row (its tokens and the targets it
// has in the packed row: its last token's is whatever follows it there), forward and backward
// whole, gradients accumulated.
Trained one_by_one(const spec::ModelSpec& config, const Packing& pk, const Batch& b, double scale) {
  MemoryTracker tracker;
  StageModel m(config, StageSpec::whole_model(config), tracker);
  m.init_parameters(kSeed);
  double loss = 0;
  int mb = 0;
  for (int r = 0; r < pk.rows(); ++r) {
    for (std::size_t j = 0; j < pk.starts[r].size(); ++j) {
      const int a = pk.starts[r][j];
      const int z = j + 1 < pk.starts[r].size() ? pk.starts[r][j + 1] : pk.tokens[r];
      Batch doc{1, z - a, {}, {}};
      const auto at = b.tokens.begin() + static_cast<std::ptrdiff_t>(r) * pk.seq;
      const auto tt = b.targets.begin() + static_cast<std::ptrdiff_t>(r) * pk.seq;
      doc.tokens.assign(at + a, at + z);
      doc.targets.assign(tt + a, tt + z);
      loss += run_whole_model(m, mb++, doc, {{0, 0, z - a}}, scale, Backward::kFused);
    }
  }
  return {loss, std::vector<float>(m.gradients().begin(), m.gradients().end())};
}

double worst_tensor_error(const StageModel& m, std::span<const float> got, const std::vector<float>& reference) {
  double worst = 0;
  for (const NamedTensor& t : m.tensors()) {
    worst = std::max(worst, scaled_max_error(got.subspan(t.offset, t.numel),
                                             std::span<const float>(reference).subspan(t.offset, t.numel)));
  }
  return worst;
}

// Row 0: documents of 5, 25 (straddling the segments' first cut), 1 and 9 tokens, then 8 of
// padding; row 1: a continuation of 17 tokens, then one of 31 filling the row.
Packing small_packing() { return {48, {{0, 5, 30, 31}, {0, 17}}, {40, 48}}; }

// A model of the family for rows of pk.seq, the packed batch, its loss scale (1 / the targets
// that count) and the documents one by one.
struct Setup {
  spec::ModelSpec config;
  Packing pk;
  Batch b;
  double scale;
  Trained ref;
};
Setup setup(spec::ModelSpec config, const Packing& pk) {
  config.max_seq = pk.seq;
  const Batch b = packed_batch(pk, config.vocab);
  const double scale = 1.0 / pk.counted();
  return {config, pk, b, scale, one_by_one(config, pk, b, scale)};
}

TEST_P(PackedDocuments, TrainLikeTheirDocumentsOneByOne) {
  const auto [config, pk, b, scale, ref] = setup(tiny(), small_packing());
  {
    // The comparison can tell: without the mask the rows attend across their documents (and
    // positions run on), and the loss is another.
    MemoryTracker tracker;
    StageModel m(config, StageSpec::whole_model(config), tracker);
    m.init_parameters(kSeed);
    const double unmasked = run_whole_model(m, 0, b, {{0, 0, pk.seq}}, scale, Backward::kFused);
    EXPECT_GT(std::abs(unmasked - ref.loss) / ref.loss, 1e-4);
  }
  // Whole; cut inside documents (the second segment starts mid-document in both rows); many cuts.
  const std::vector<std::vector<int>> cuts = {{48}, {12, 36}, {3, 10, 20, 15}};
  for (const auto& lengths : cuts) {
    for (Backward mode : {Backward::kFused, Backward::kSplitDeferred}) {
      for (int recompute : {0, 2}) {
        MemoryTracker tracker;
        StageSpec spec = StageSpec::whole_model(config);
        spec.recompute_layers = recompute;
        StageModel m(config, spec, tracker);
        m.init_parameters(kSeed);
        m.set_documents(4, pk.mask(), pk.seq);
        const double loss = run_whole_model(m, 4, b, segments_from_lengths(pk.seq, lengths), scale, mode);
        const double err = worst_tensor_error(m, m.gradients(), ref.gradients);
        SCOPED_TRACE("k = " + std::to_string(lengths.size()) + " recompute " + std::to_string(recompute));
        EXPECT_LE(std::abs(loss - ref.loss) / ref.loss, kLossTolerance);
        EXPECT_LE(err, kGradientTolerance);
        std::printf("[ measured ] %s k=%zu recompute %d: loss %.3g, worst gradient error %.2e\n",
                    std::string(spec::family_name(config.family)).c_str(), lengths.size(), recompute,
                    std::abs(loss - ref.loss) / ref.loss, err);
        EXPECT_EQ(m.microbatches_in_flight(), 0u);
        EXPECT_EQ(tracker.current(MemoryCategory::kActivations), 0u);
      }
    }
  }
}

TEST_P(PackedDocuments, AcrossAttentionTilesLikeTheirDocumentsOneByOne) {
  // Rows of 150 (the kernel's tiles are 64): documents [0, 70), [70, 134), [134, 150), each
  // across a tile boundary; a row of one document of 100 and 50 of padding. Segments of 90, 60.
  const auto [config, pk, b, scale, ref] = setup(tiny(), Packing{150, {{0, 70, 134}, {0}}, {150, 100}});
  MemoryTracker tracker;
  StageModel m(config, StageSpec::whole_model(config), tracker);
  m.init_parameters(kSeed);
  m.set_documents(0, pk.mask(), pk.seq);
  const double loss = run_whole_model(m, 0, b, segments_from_lengths(pk.seq, {90, 60}), scale, Backward::kFused);
  const double err = worst_tensor_error(m, m.gradients(), ref.gradients);
  EXPECT_LE(std::abs(loss - ref.loss) / ref.loss, kLossTolerance);
  EXPECT_LE(err, kGradientTolerance);
  std::printf("[ measured ] %s seq 150: loss %.3g, worst gradient error %.2e\n",
              std::string(spec::family_name(config.family)).c_str(), std::abs(loss - ref.loss) / ref.loss, err);
}

TEST_P(PackedDocuments, TwoPipelineStagesWithSegmentsLikeTheirDocumentsOneByOne) {
  const auto [config, pk, b, scale, ref] = setup(tiny(), small_packing());
  MemoryTracker tracker;
  StageModel first(config, {0, 1, true, false}, tracker), last(config, {1, 2, false, true}, tracker);
  first.init_parameters(kSeed);
  last.init_parameters(kSeed);
  // Both stages are given the mask (the runtime gives it to every stage).
  first.set_documents(0, pk.mask(), pk.seq);
  last.set_documents(0, pk.mask(), pk.seq);
  const auto segs = segments_from_lengths(pk.seq, {20, 28});
  double loss = 0;
  std::vector<std::vector<float>> acts;
  for (const Segment& s : segs) {
    const auto tok = columns(b.tokens, b.rows, b.seq, s);
    const auto tgt = columns(b.targets, b.rows, b.seq, s);
    acts.emplace_back(static_cast<std::size_t>(b.rows) * s.length * config.hidden);
    first.forward(0, b.rows, s, nullptr, tok.data(), acts.back().data());
    loss += last.forward_loss(0, b.rows, s, acts.back().data(), nullptr, tgt.data(), scale);
  }
  for (int i = 1; i >= 0; --i) {
    std::vector<float> grad(acts[i].size());
    last.backward(0, segs[i], nullptr, grad.data());
    first.backward(0, segs[i], grad.data(), nullptr);
  }
  EXPECT_LE(std::abs(loss - ref.loss) / ref.loss, kLossTolerance);
  // The whole model's gradient buffer from the two stages' tensors, by name.
  MemoryTracker t2;
  StageModel whole(config, StageSpec::whole_model(config), t2);
  std::vector<float> got(whole.gradients().size(), 0.0f);
  for (const NamedTensor& t : whole.tensors()) {
    for (StageModel* stage : {&first, &last}) {
      for (const NamedTensor& st : stage->tensors()) {
        if (st.name != t.name) continue;
        const auto g = stage->gradient(st.name);
        for (std::size_t i = 0; i < g.size(); ++i) got[t.offset + i] += g[i];
      }
    }
  }
  EXPECT_LE(worst_tensor_error(whole, got, ref.gradients), kGradientTolerance);
}

TEST_P(PackedDocuments, AMaskThatDoesNotCoverTheSegmentIsRefused) {
  spec::ModelSpec config = tiny();
  config.max_seq = 48;
  MemoryTracker tracker;
  StageModel m(config, StageSpec::whole_model(config), tracker);
  const Batch b = random_batch(1, 20, config.vocab, 1);
  m.set_documents(0, std::vector<std::int32_t>(10, 0), 10);
  EXPECT_THROW(run_whole_model(m, 0, b, {{0, 0, 20}}, 0.1, Backward::kFused), Error);
  m.set_documents(1, std::vector<std::int32_t>(7, 0), 10);  // not batch x stride
  EXPECT_THROW(run_whole_model(m, 1, b, {{0, 0, 10}}, 0.1, Backward::kFused), Error);
}

PLAIT_FOR_EVERY_FAMILY(PackedDocuments);

}  // namespace
}  // namespace plait::model
