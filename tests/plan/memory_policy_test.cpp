#include <gtest/gtest.h>

#include "plait/plan/memory_policy.h"

namespace plait::plan {
namespace {

// The policy adds only what no unit holds: its per-parameter bytes and every unit figure are the
// model description's (spec/unit_memory.h), so fp32 planning uses the CPU engine's exact table.
TEST(MemoryPolicy, StaticBytesComeFromTheDescription) {
  const MemoryPolicy mixed{Precision::bf16, {}};
  EXPECT_DOUBLE_EQ(mixed.static_bytes(1000, 1), 1000 * spec::parameter_bytes(Precision::bf16).total());
  EXPECT_DOUBLE_EQ(mixed.static_bytes(1000, 1), 18000);
  EXPECT_DOUBLE_EQ(mixed.static_bytes(1000, 4), 6000 + 3000);  // 12 optimizer bytes sharded
  const MemoryPolicy fp32{Precision::fp32, {}};
  EXPECT_DOUBLE_EQ(fp32.static_bytes(1000, 4), 16000);
  EXPECT_DOUBLE_EQ(mixed.reserve_bytes(16.0 * (1 << 30)), 2.0 * (1 << 30));
  EXPECT_DOUBLE_EQ(fp32.reserve_bytes(1000), 100);
  EXPECT_EQ(mixed.memory_options().precision, Precision::bf16);
  EXPECT_TRUE((MemoryPolicy{Precision::bf16, spec::Recompute::full()}.memory_options().recompute.any()));
}

// Gradient sync bytes per parameter: mixed16 reduce-scatters 4 B fp32 gradients and all-gathers
// 2 B bf16 weights (6; all-reduce at level 0: 8); with grad_reduce bf16 the gradients are 2 B
// (4; level 0: 4). fp32 keeps 8 either way (it cannot reduce bf16).
TEST(MemoryPolicy, SyncBytesFollowWhatDataParallelismReduces) {
  MemoryPolicy mixed{Precision::bf16, {}};
  EXPECT_DOUBLE_EQ(mixed.sync_bytes_per_parameter(spec::ShardPolicy{1, false}), 6);
  EXPECT_DOUBLE_EQ(mixed.sync_bytes_per_parameter(spec::ShardPolicy{0, false}), 8);
  mixed.grad_reduce = spec::GradReduce::bf16;
  EXPECT_DOUBLE_EQ(mixed.sync_bytes_per_parameter(spec::ShardPolicy{1, false}), 4);
  EXPECT_DOUBLE_EQ(mixed.sync_bytes_per_parameter(spec::ShardPolicy{0, false}), 4);
  EXPECT_DOUBLE_EQ(mixed.sync_bytes_per_parameter(), 4);
  EXPECT_DOUBLE_EQ((MemoryPolicy{Precision::fp32, {}}.sync_bytes_per_parameter(spec::ShardPolicy{0, false})), 8);
}

// The working set: fp32 the engine's backward peak of the longest unit (with a recomputed
// layer's rebuild when the part recomputes), its micro-batch's dK/dV accumulators and two receive
// buffers; bf16 nothing beyond the reserve, or with recomputation the one layer rebuilt at a time.
TEST(MemoryPolicy, WorkingBytesAreTheUnitTable) {
  const spec::ModelSpec m = spec::gpt2_model(8, 128, 4, 256, 256);
  const spec::SequencePartition p = spec::even_partition(m, 256, 2);
  for (int recompute : {0, 1}) {
    const spec::StagePart part{1, false, true, recompute};
    const spec::UnitMemory last = spec::unit_memory(m, part, 2, p.segment(1), Precision::fp32, 1);
    const spec::UnitMemory first = spec::unit_memory(m, part, 2, p.segment(0), Precision::fp32, 1);
    EXPECT_DOUBLE_EQ(MemoryPolicy({Precision::fp32, {}}).working_bytes(m, 2, p, part),
                     static_cast<double>(std::max(last.backward_peak, last.fused_peak) + first.dkv + last.dkv) +
                         2.0 * 4 * 2 * 128 * 128);
    EXPECT_DOUBLE_EQ(MemoryPolicy({Precision::bf16, {}}).working_bytes(m, 2, p, part),
                     recompute ? static_cast<double>(spec::unit_memory(m, part, 2, p.segment(1), Precision::bf16, 1).recompute_layer)
                               : 0.0);
  }
  // The rebuild is in the fp32 working set.
  EXPECT_GT(MemoryPolicy({Precision::fp32, {}}).working_bytes(m, 2, p, {1, false, true, 1}),
            MemoryPolicy({Precision::fp32, {}}).working_bytes(m, 2, p, {1, false, true, 0}));
}

// bf16 on plait's CPU engine (an emulated cluster): the engine's working set with the bf16 unit
// table and 2-byte receive buffers, and the CPU's 10% reserve, not the 2 GiB a GPU keeps for its
// CUDA context (which made a 1 GiB emulated rank too small for any layer).
TEST(MemoryPolicy, Bf16OnTheCpuEngineCountsTheEnginesWorkingSetAndTheCpuReserve) {
  const spec::ModelSpec m = spec::gpt2_model(8, 128, 4, 256, 256);
  const spec::SequencePartition p = spec::even_partition(m, 256, 2);
  const spec::StagePart part{1, false, true, 0};
  const MemoryPolicy cpu{Precision::bf16, {}, true};
  const spec::UnitMemory last = spec::unit_memory(m, part, 2, p.segment(1), Precision::bf16, 1);
  const spec::UnitMemory first = spec::unit_memory(m, part, 2, p.segment(0), Precision::bf16, 1);
  EXPECT_DOUBLE_EQ(cpu.working_bytes(m, 2, p, part),
                   static_cast<double>(std::max(last.backward_peak, last.fused_peak) + first.dkv + last.dkv) +
                       2.0 * 2 * 2 * 128 * 128);
  EXPECT_DOUBLE_EQ(cpu.reserve_bytes(1024.0 * (1 << 20)), 0.1 * 1024.0 * (1 << 20));
  EXPECT_DOUBLE_EQ(cpu.static_bytes(1000, 1), 18000);  // the bf16 parameter bytes all the same
  EXPECT_NE(cpu.describe().find("CPU engine"), std::string::npos);
}

}  // namespace
}  // namespace plait::plan
