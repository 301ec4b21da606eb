// The stage model reaches memory and kernels only through its backend (kernels/backend.h): a
// backend that counts what it is asked sees every block the tensor pool holds, the token upload,
// and every matmul and attention of a training step, and the step's results are bitwise those of
// the default CPU backend.
#include <gtest/gtest.h>

#include <map>

#include "plait/core/memory_tracker.h"
#include "plait/kernels/cpu_backend.h"
#include "tiny_model.h"

namespace plait::model {
namespace {

using namespace plait::model::testing;

// The CPU backend, counting the calls the seam carries.
class CountingBackend : public kernels::CpuBackend {
 public:
  void* allocate(std::size_t bytes) override {
    ++allocations;
    outstanding_bytes += bytes;
    return CpuBackend::allocate(bytes);
  }
  void deallocate(void* block, std::size_t bytes) override {
    outstanding_bytes -= bytes;
    CpuBackend::deallocate(block, bytes);
  }
  void copy(void* dst, const void* src, std::size_t bytes, CopyKind kind) override {
    ++copies[kind];
    CpuBackend::copy(dst, src, bytes, kind);
  }
  void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                      const float* residual, int n, int c, int oc) override {
    ++matmul_forwards;
    CpuBackend::matmul_forward(out, inp, weight, bias, residual, n, c, oc);
  }
  void attention_forward(float* out, float* lse, const float* q,
                         std::span<const kernels::KVBlock<float>> blocks, int batch, int s, int c,
                         int heads, int kv_heads, kernels::DocumentMask mask) override {
    ++attention_forwards;
    CpuBackend::attention_forward(out, lse, q, blocks, batch, s, c, heads, kv_heads, mask);
  }
  void attention_backward(float* dq, std::span<const kernels::KVBlock<float>> blocks,
                          const float* dout, const float* q, const float* out, const float* lse,
                          int batch, int s, int c, int heads, int kv_heads,
                          float* workspace, kernels::DocumentMask mask) override {
    ++attention_backwards;
    CpuBackend::attention_backward(dq, blocks, dout, q, out, lse, batch, s, c, heads, kv_heads,
                                   workspace, mask);
  }
  void normal_init(float* values, std::size_t n, double std, std::uint64_t key) override {
    ++normal_inits;
    CpuBackend::normal_init(values, n, std, key);
  }

  int allocations = 0;
  std::size_t outstanding_bytes = 0;
  std::map<CopyKind, int> copies;
  int matmul_forwards = 0, attention_forwards = 0, attention_backwards = 0;
  int normal_inits = 0;
};

class BackendSeam : public FamilyTest {};

TEST_P(BackendSeam, AStepRunsThroughTheStageModelsBackend) {
  const spec::ModelSpec config = tiny();
  const Batch b = random_batch(2, 13, config.vocab, 5);
  const auto segs = segments_from_lengths(13, {3, 6, 4});
  const StageSpec whole = StageSpec::whole_model(config);

  MemoryTracker reference_tracker;
  StageModel reference(config, whole, reference_tracker);
  reference.init_parameters(11);
  const double reference_loss = run_whole_model(reference, 0, b, segs, 0.02, Backward::kSplitDeferred);

  CountingBackend backend;
  {
    MemoryTracker tracker;
    StageModel m(config, whole, tracker, backend);
    EXPECT_EQ(&m.backend(), &backend);
    EXPECT_EQ(&m.pool().backend(), &backend);
    m.init_parameters(11);
    EXPECT_GT(backend.normal_inits, 0);
    const double loss = run_whole_model(m, 0, b, segs, 0.02, Backward::kSplitDeferred);
    EXPECT_EQ(loss, reference_loss);
    EXPECT_TRUE(bitwise_equal(m.gradients(), reference.gradients()));

    // Every block the pool got came from the backend; one token upload per unit.
    EXPECT_EQ(static_cast<std::size_t>(backend.allocations), m.pool().system_allocations());
    EXPECT_EQ(backend.copies[CopyKind::kHostToDevice], static_cast<int>(segs.size()));
    // Per unit and layer: the q, K/V, attention output and two MLP projections; and the head.
    const int units = static_cast<int>(segs.size());
    EXPECT_EQ(backend.matmul_forwards, units * (5 * config.layers + 1));
    EXPECT_EQ(backend.attention_forwards, units * config.layers);
    EXPECT_EQ(backend.attention_backwards, units * config.layers);
  }
  // The pool gave its cache back to the backend when the stage went.
  EXPECT_EQ(backend.outstanding_bytes, 0u);
}

PLAIT_FOR_EVERY_FAMILY(BackendSeam);

}  // namespace
}  // namespace plait::model
