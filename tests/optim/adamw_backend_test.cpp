// AdamW keeps its moments in the memory of the backend it is given (kernels/backend.h) and
// updates through it, one call per range, with the default CPU backend's bits.
#include <gtest/gtest.h>

#include <vector>

#include "plait/core/memory_tracker.h"
#include "plait/kernels/cpu_backend.h"
#include "plait/optim/adamw.h"

namespace plait::optim {
namespace {

class CountingBackend : public kernels::CpuBackend {
 public:
  void* allocate(std::size_t bytes) override {
    allocated += bytes;
    return CpuBackend::allocate(bytes);
  }
  void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                    const kernels::AdamWHyper& hyper) override {
    ++updates;
    CpuBackend::adamw_update(params, grads, m, v, n, hyper);
  }
  int updates = 0;
  std::size_t allocated = 0;
};

TEST(AdamWBackend, UpdatesThroughItsBackend) {
  std::vector<float> a(10), b(10), g(10);
  for (int i = 0; i < 10; ++i) {
    a[i] = b[i] = 0.1f * static_cast<float>(i) - 0.3f;
    g[i] = 0.01f * static_cast<float>(i * i) - 0.2f;
  }
  const std::vector<ParamRange> ranges = {{0, 4, true}, {4, 6, false}};
  MemoryTracker tracker;
  CountingBackend backend;
  AdamW through(a, ranges, {}, tracker, backend);
  AdamW reference(b, ranges, {}, tracker);
  for (int step = 0; step < 3; ++step) {
    through.step(g, 1e-2, 0.5);
    reference.step(g, 1e-2, 0.5);
  }
  // Both moments live in the backend's memory: 10 floats each, in whole 64-byte lines.
  EXPECT_EQ(backend.allocated, 2 * 64u);
  EXPECT_EQ(backend.updates, 3 * 2);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace plait::optim
