// OneDnnContext: the path it takes, its bounded primitive cache and its tracked workspace; and,
// under ONEDNN_MAX_CPU_ISA=AVX2 (a ctest entry of its own, tests/kernels/CMakeLists.txt), that
// oneDNN's ISA limit selects the fallback and its results are right.
#include "plait/kernels/onednn_context.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "bf16_gemm_test_support.h"
#include "plait/kernels/gemm_peak.h"
#include "plait/kernels/bf16_matmul.h"

namespace plait::kernels {
namespace {

using namespace plait::kernels::testing;

// out (n, oc) of a forward with the given sizes (random operands), for the cache and workspace.
void forward(OneDnnContext& context, int n, int c, int oc) {
  const auto inp = random_bf16(static_cast<std::size_t>(n) * c, 1);
  const auto w = random_bf16(static_cast<std::size_t>(oc) * c, 2);
  std::vector<bf16> out(static_cast<std::size_t>(n) * oc);
  matmul_forward_bf16(context, out.data(), inp.data(), w.data(), nullptr, nullptr, n, c, oc);
}

// The largest forward error relative to its bound (<= 1 passes).
double forward_error_over_bound(OneDnnContext& context, int n, int c, int oc) {
  const auto inp = random_bf16(static_cast<std::size_t>(n) * c, 3);
  const auto w = random_bf16(static_cast<std::size_t>(oc) * c, 4);
  const auto b = random_bf16(oc, 5);
  std::vector<bf16> out(static_cast<std::size_t>(n) * oc);
  matmul_forward_bf16(context, out.data(), inp.data(), w.data(), b.data(), nullptr, n, c, oc);
  double worst = 0;
  for (int i = 0; i < n; ++i) {
    for (int o = 0; o < oc; ++o) {
      Reference ref;
      for (int j = 0; j < c; ++j) ref.add(double(to_float(inp[i * c + j])) * to_float(w[o * c + j]));
      ref.add(to_float(b[o]));
      worst = std::max(worst, std::fabs(to_float(out[i * oc + o]) - ref.sum) / ref.bound_bf16());
    }
  }
  return worst;
}

TEST(OneDnnContext, PathFollowsTheIsaAndTheForceFlag) {
  PathContext native(false), forced(true);
  const OneDnnContext& n = *native.context;
  EXPECT_FALSE(n.isa().empty());
  EXPECT_EQ(n.native_bf16(), n.isa() == "avx512_core_bf16" || n.isa() == "avx512_core_amx");
  EXPECT_EQ(n.path(), n.native_bf16() ? Bf16GemmPath::kOneDnn : Bf16GemmPath::kWidenedSgemm);
  EXPECT_EQ(forced.context->path(), Bf16GemmPath::kWidenedSgemm);
  EXPECT_EQ(forced.context->isa(), n.isa());
  EXPECT_NE(n.describe().find("ISA " + n.isa()), std::string::npos) << n.describe();
  EXPECT_NE(n.describe().find(std::string(name_of(n.path()))), std::string::npos) << n.describe();
}

TEST(OneDnnContext, ExecuteRefusesTheFallbackPath) {
  PathContext forced(true);
  EXPECT_THROW(forced.context->execute({}, {}), Error);
}

TEST(OneDnnContext, CacheKeepsAtMostItsCapacityLeastRecentlyUsedOut) {
  PathContext p(false, 2);
  PLAIT_SKIP_UNLESS_PATH(*p.context, false);
  OneDnnContext& c = *p.context;
  forward(c, 3, 8, 5);  // A
  forward(c, 4, 8, 5);  // B
  forward(c, 3, 8, 5);  // A again: a hit, A most recent
  EXPECT_EQ(c.primitive_creations(), 2u);
  forward(c, 5, 8, 5);  // C evicts B
  EXPECT_EQ(c.primitive_creations(), 3u);
  EXPECT_EQ(c.cached_primitives(), 2u);
  forward(c, 3, 8, 5);  // A still cached
  EXPECT_EQ(c.primitive_creations(), 3u);
  forward(c, 4, 8, 5);  // B was evicted: created again
  EXPECT_EQ(c.primitive_creations(), 4u);
  EXPECT_EQ(c.cached_primitives(), 2u);
  EXPECT_GT(c.primitive_creation_seconds(), 0.0);
}

TEST(OneDnnContext, FallbackCreatesNoPrimitives) {
  PathContext p(true);
  forward(*p.context, 3, 8, 5);
  EXPECT_EQ(p.context->primitive_creations(), 0u);
}

// The workspace (oneDNN's user-managed scratchpad, or the fallback's fp32 tiles) is charged to the
// tracker's category, grows only, and is released with the context.
void check_workspace_is_tracked(bool fallback) {
  PathContext p(fallback);
  PLAIT_SKIP_UNLESS_PATH(*p.context, fallback);
  OneDnnContext& c = *p.context;
  const MemoryCategory cat = MemoryCategory::kActivations;
  EXPECT_EQ(c.category(), cat);
  EXPECT_EQ(p.tracker.current(cat), 0u);
  // K = 2048 with a bf16 result: oneDNN blocks K and keeps the fp32 partial sums in its
  // scratchpad; the fallback holds its A, B and accumulator tiles.
  forward(c, 64, 2048, 64);
  const std::size_t big = c.workspace_bytes();
  EXPECT_GT(big, 0u);
  EXPECT_EQ(p.tracker.current(cat), big);
  forward(c, 4, 16, 4);
  EXPECT_EQ(c.workspace_bytes(), big) << "grow-only";
  EXPECT_EQ(p.tracker.current(cat), big);
  p.context.reset();
  EXPECT_EQ(p.tracker.current(cat), 0u);
  EXPECT_EQ(p.tracker.peak(cat), big);
}

TEST(OneDnnContext, ScratchpadIsChargedToTheTracker) { check_workspace_is_tracked(false); }
TEST(OneDnnContext, FallbackPanelsAreChargedToTheTracker) { check_workspace_is_tracked(true); }

TEST(OneDnnContext, WorkspaceBeyondTheTrackersCapacityIsOutOfMemory) {
  MemoryTracker small(std::size_t{1024});
  OneDnnContext c(host_memory(), small, MemoryCategory::kActivations, {8, true});
  EXPECT_THROW(forward(c, 64, 2048, 64), OutOfMemoryError);
  EXPECT_EQ(small.current_total(), 0u);
  EXPECT_EQ(c.workspace_bytes(), 0u);
}

TEST(OneDnnContext, Bf16PeakIsPositiveOnEitherPath) {
  for (const bool fallback : {false, true}) {
    PathContext p(fallback);
    EXPECT_GT(bf16_gemm_peak_gflops(*p.context, 64, 1), 0.0);
  }
}

// Run by its own ctest entry with ONEDNN_MAX_CPU_ISA=AVX2 (oneDNN reads it once, at first use,
// so it cannot be set from inside a test binary that has used oneDNN already).
TEST(OneDnnIsaLimit, Avx2LimitSelectsTheFallbackAndItComputesRight) {
  const char* limit = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (limit == nullptr || std::string(limit) != "AVX2") {
    GTEST_SKIP() << "needs ONEDNN_MAX_CPU_ISA=AVX2 in the environment: ctest runs it as "
                    "OneDnnIsaLimit.Avx2 (tests/kernels/CMakeLists.txt)";
  }
  PathContext p(false);
  const OneDnnContext& c = *p.context;
  EXPECT_FALSE(c.native_bf16()) << c.isa();
  EXPECT_TRUE(c.isa() == "avx2" || c.isa() == "avx" || c.isa() == "sse41") << c.isa();
  EXPECT_EQ(c.path(), Bf16GemmPath::kWidenedSgemm) << c.describe();
  EXPECT_LE(forward_error_over_bound(*p.context, 37, 1100, 53), 1.0);
}

}  // namespace
}  // namespace plait::kernels
