// The CUDA AdamW, sum of squares and scaling against the CPU kernels (kernels/adamw.h,
// grad_norm.h).
#include "cuda_test_support.h"
#include "plait/kernels/adamw.h"
#include "plait/kernels/cuda/adamw.h"
#include "plait/kernels/cuda/grad_norm.h"
#include "plait/kernels/grad_norm.h"

namespace plait::kernels::cuda {
namespace {

using namespace plait::kernels::cuda::testing;

class CudaOptimizer : public CudaKernelTest {};

// Three steps on the same state, with clipping folded in, fp32 master weights and the bf16 copy.
TEST_F(CudaOptimizer, AdamWMatchesCpu) {
  const std::size_t n = 5003;
  const auto p0 = as<float>(random_vector(n, 51));
  const auto g = as<float>(random_vector(n, 52, 0.1));
  std::vector<float> p = p0, m(n, 0.0f), v(n, 0.0f);
  DeviceBuffer<float> gp(as_double(p0)), gg(as_double(g)), gm(std::vector<double>(n, 0.0)),
      gv(std::vector<double>(n, 0.0));
  DeviceBuffer<bf16> gcopy(n);
  gcopy.poison();
  for (int step = 1; step <= 3; ++step) {
    const AdamWHyper h{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.5f};
    kernels::adamw_update(p.data(), g.data(), m.data(), v.data(), n, h);
    adamw_update(gp.get(), gcopy.get(), gg.get(), gm.get(), gv.get(), n, h, ctx());
  }
  sync();
  expect_close("adamw params", gp.download(), as_double(p), kFp32Bound);
  expect_close("adamw m", gm.download(), as_double(m), kFp32Bound);
  expect_close("adamw v", gv.download(), as_double(v), kFp32Bound);
  // The copy is the GPU's master weight rounded to bf16, exactly.
  expect_close("adamw bf16 copy", gcopy.download(), stored<bf16>(gp.download()), 0.0);
}

TEST_F(CudaOptimizer, SumOfSquaresMatchesCpu) {
  for (std::size_t n : {std::size_t{1}, std::size_t{1000}, kSumOfSquaresChunk * 3 + 17}) {
    const auto x = as<float>(random_vector(n, 53));
    DeviceBuffer<float> gx(as_double(x));
    DeviceBuffer<double> result(1), workspace(sum_of_squares_workspace(n));
    sum_of_squares(result.get(), gx.get(), n, workspace.get(), ctx());
    sync();
    const double cpu = kernels::sum_of_squares(x.data(), n);
    // Both accumulate in double, in different orders: far below fp32's bound.
    EXPECT_NEAR(result.download()[0], cpu, 1e-10 * cpu) << "n=" << n;
  }
}

TEST_F(CudaOptimizer, ScaleInPlaceMatchesCpu) {
  const std::size_t n = 777;
  auto x = as<float>(random_vector(n, 54));
  DeviceBuffer<float> gx(as_double(x));
  kernels::scale_in_place(x.data(), n, 0.37f);
  scale_in_place(gx.get(), n, 0.37f, ctx());
  sync();
  expect_close("scale_in_place", gx.download(), as_double(x), 0.0);
}

}  // namespace
}  // namespace plait::kernels::cuda
