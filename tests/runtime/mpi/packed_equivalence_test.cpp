// Packed documents across ranks (issue 24): a pipeline-parallel, data-parallel job on sequences
// packed from documents (the real loader, packed_tiny_data.h: several documents per row,
// padding, pieces of long documents, Seq1F1B segments cut inside documents) trains to the
// single-process trainer's losses, gradients and parameters on the same global batch, with
// equivalence_check.h's metric and bounds (1e-5 in fp32): the document mask reaches every stage
// of every rank, and the loss is normalised by the targets that count in the GLOBAL batch (every
// micro-batch of every replica), which every rank counts alike. The single-process trainer itself
// equals the documents run one by one (tests/runtime/packed_training_test.cpp), so the layouts
// here do too. 4 ranks: pp 2 x dp 2 with Seq1F1B (4 segments, level 0 and ZeRO level 2), 1F1B
// with recomputation, and the other schedule families (several chunks per rank, V placement
// with local hand-offs, split backwards with segments); pp 2 x TP 2 with segments (positions run
// per document on each TP rank's rows, the padding's targets through the vocabulary-parallel
// cross-entropy). With work-aware cuts (data.packing "documents" + parallel.split "flops", issue 24
// part 4) every micro-batch runs its own segment lengths, cut from its documents on every rank
// alike: the segments change only where the work is split, never the math, so the same bounds
// hold (Seq1F1B, its split-backward twin, ZeRO level 2, and TP 2 with lengths of multiples of 2),
// and every rank's peak activations and K/V stay within the memory planned for the worst cut.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "equivalence_check.h"
#include "mpi_test_session.h"
#include "packed_tiny_data.h"
#include "plait/runtime/microbatch_partition.h"
#include "plait/runtime/pipeline_plan.h"
#include "plait/runtime/predicted_memory.h"
#include "tiny_job.h"

namespace plait::runtime {
namespace {

comm::Communicator& world() { return plait::test::mpi_session().world(); }

struct PackedCase {
  spec::Family family;
  std::string schedule;
  int segments;
  int shard = 0;
  bool recompute = false;
  int chunks = 0;
  int tp = 1;
  bool cuts = false;  // work-aware cuts per micro-batch
};

// The cuts of the steps' micro-batches: they must differ from each other (the test would prove
// nothing otherwise) and every one must cover the sequence in the plan's k segments.
void expect_cuts_vary(const PipelinePlan& plan, const data::SequentialLoader& loader, int steps) {
  ASSERT_TRUE(plan.document_cuts);
  std::vector<std::vector<std::int64_t>> seen;
  for (int i = 0; i < steps * plan.global_microbatches(); ++i) {
    const spec::SequencePartition p =
        microbatch_partition(plan, loader.documents(i / plan.global_microbatches(), i % plan.global_microbatches()));
    ASSERT_EQ(p.count(), plan.partition.count());
    ASSERT_EQ(p.seq(), plan.seq);
    for (std::int64_t length : p.lengths) EXPECT_EQ(length % plan.max_tensor_parallel(), 0);
    if (std::find(seen.begin(), seen.end(), p.lengths) == seen.end()) seen.push_back(p.lengths);
  }
  // Under TP 2 the tiny model's cuts all round to the same multiples of 2 (at 16 tokens its
  // matmuls outweigh attention): that case pins the rounding and the sizes under TP only.
  if (!plan.any_tensor_parallel()) {
    EXPECT_GE(seen.size(), 2u) << "every micro-batch got the same cut";
  }
}

class PackedEquivalence : public ::testing::TestWithParam<PackedCase> {};

TEST_P(PackedEquivalence, MatchesOneProcessAfterThreeSteps) {
  if (world().size() != 4) GTEST_SKIP() << "needs 4 ranks";
  const PackedCase& c = GetParam();
  JobConfig job = test::tiny_job(c.schedule, 2, c.tp > 1 ? 1 : 2, 4, c.segments, c.family);
  job.parallel.chunks = c.chunks;
  if (c.tp > 1) job.parallel.tp = {c.tp};
  if (c.shard > 0) job.parallel.shard = {c.shard};
  if (c.recompute) job.parallel.recompute = spec::Recompute::full();
  if (c.cuts) {
    job.run.data.packing = "documents";
    job.run.train.segments.split = spec::SplitMethod::flops;
  }
  const TrainConfig global = job.global_train();
  const test::TinyData tokens(job.run.model.vocab);
  const test::PackedTinyData packed(tokens, global.seq);
  const data::SequentialLoader loader = packed.loader(global);
  const PipelinePlan plan = build_pipeline_plan(job, world().size());
  if (!c.cuts) {
    test::expect_equivalent_on(plan, global, loader, [](DistributedTrainer&, MemoryTracker&) {});
    return;
  }
  expect_cuts_vary(plan, loader, global.steps);
  // Memory is planned for the worst cut of the steps: every rank's measured peaks stay within it.
  const spec::SequencePartition worst = worst_case_partition(plan, loader, 0, global.steps);
  // (Per schedule rank: under TP each of its t job ranks holds the same.)
  const sim::CategoryPeaks planned =
      predicted_memory(plan, 1, &worst)[static_cast<std::size_t>(plan.schedule_rank_of(world().rank()))];
  test::expect_equivalent_on(plan, global, loader, [&](DistributedTrainer& trainer, MemoryTracker& tracker) {
    EXPECT_LE(static_cast<double>(tracker.peak(MemoryCategory::kActivations)), planned.activations)
        << "rank " << trainer.rank();
    EXPECT_LE(static_cast<double>(tracker.peak(MemoryCategory::kKVCache)), planned.kv_cache)
        << "rank " << trainer.rank();
  });
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, PackedEquivalence,
    ::testing::Values(PackedCase{spec::Family::gpt2, "seq1f1b", 4}, PackedCase{spec::Family::llama, "seq1f1b", 4},
                      PackedCase{spec::Family::gpt2, "seq1f1b", 4, 2}, PackedCase{spec::Family::llama, "1f1b", 1, 0, true},
                      PackedCase{spec::Family::gpt2, "gpipe", 1}, PackedCase{spec::Family::llama, "interleaved", 1, 0, false, 2},
                      PackedCase{spec::Family::gpt2, "seq1f1b-i", 2, 0, false, 2}, PackedCase{spec::Family::llama, "zb-v", 1},
                      PackedCase{spec::Family::gpt2, "seq-zb", 4}, PackedCase{spec::Family::llama, "seq1f1b", 2, 0, false, 0, 2},
                      PackedCase{spec::Family::gpt2, "seq1f1b", 2, 0, false, 0, 2},
                      PackedCase{spec::Family::gpt2, "seq1f1b", 4, 0, false, 0, 1, true},
                      PackedCase{spec::Family::llama, "seq1f1b", 4, 2, false, 0, 1, true},
                      PackedCase{spec::Family::llama, "seq-zb", 4, 0, false, 0, 1, true},
                      PackedCase{spec::Family::gpt2, "seq1f1b", 4, 0, false, 0, 2, true}),
    [](const auto& info) {
      const PackedCase& c = info.param;
      std::string n = std::string(spec::family_name(c.family)) + "_" + c.schedule + "_k" + std::to_string(c.segments);
      if (c.shard > 0) n += "_shard" + std::to_string(c.shard);
      if (c.recompute) n += "_recompute";
      if (c.tp > 1) n += "_tp" + std::to_string(c.tp);
      if (c.cuts) n += "_cuts";
      for (char& ch : n) {
        if (ch == '-') ch = '_';
      }
      return n;
    });

}  // namespace
}  // namespace plait::runtime
