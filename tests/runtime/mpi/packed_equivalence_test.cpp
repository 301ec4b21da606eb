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
// cross-entropy).
#include <gtest/gtest.h>

#include <string>

#include "equivalence_check.h"
#include "mpi_test_session.h"
#include "packed_tiny_data.h"
#include "plait/runtime/pipeline_plan.h"
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
};

class PackedEquivalence : public ::testing::TestWithParam<PackedCase> {};

TEST_P(PackedEquivalence, MatchesOneProcessAfterThreeSteps) {
  if (world().size() != 4) GTEST_SKIP() << "needs 4 ranks";
  const PackedCase& c = GetParam();
  JobConfig job = test::tiny_job(c.schedule, 2, c.tp > 1 ? 1 : 2, 4, c.segments, c.family);
  job.parallel.chunks = c.chunks;
  if (c.tp > 1) job.parallel.tp = {c.tp};
  if (c.shard > 0) job.parallel.shard = {c.shard};
  if (c.recompute) job.parallel.recompute = spec::Recompute::full();
  const TrainConfig global = job.global_train();
  const test::TinyData tokens(job.run.model.vocab);
  const test::PackedTinyData packed(tokens, global.seq);
  const data::SequentialLoader loader = packed.loader(global);
  test::expect_equivalent_on(build_pipeline_plan(job, world().size()), global, loader,
                             [](DistributedTrainer&, MemoryTracker&) {});
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, PackedEquivalence,
    ::testing::Values(PackedCase{spec::Family::gpt2, "seq1f1b", 4}, PackedCase{spec::Family::llama, "seq1f1b", 4},
                      PackedCase{spec::Family::gpt2, "seq1f1b", 4, 2}, PackedCase{spec::Family::llama, "1f1b", 1, 0, true},
                      PackedCase{spec::Family::gpt2, "gpipe", 1}, PackedCase{spec::Family::llama, "interleaved", 1, 0, false, 2},
                      PackedCase{spec::Family::gpt2, "seq1f1b-i", 2, 0, false, 2}, PackedCase{spec::Family::llama, "zb-v", 1},
                      PackedCase{spec::Family::gpt2, "seq-zb", 4}, PackedCase{spec::Family::llama, "seq1f1b", 2, 0, false, 0, 2},
                      PackedCase{spec::Family::gpt2, "seq1f1b", 2, 0, false, 0, 2}),
    [](const auto& info) {
      const PackedCase& c = info.param;
      std::string n = std::string(spec::family_name(c.family)) + "_" + c.schedule + "_k" + std::to_string(c.segments);
      if (c.shard > 0) n += "_shard" + std::to_string(c.shard);
      if (c.recompute) n += "_recompute";
      if (c.tp > 1) n += "_tp" + std::to_string(c.tp);
      for (char& ch : n) {
        if (ch == '-') ch = '_';
      }
      return n;
    });

}  // namespace
}  // namespace plait::runtime
