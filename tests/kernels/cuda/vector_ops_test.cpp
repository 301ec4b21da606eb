// The CUDA fill, accumulate and normal_init against the CPU kernels (kernels/vector_ops.h,
// normal_init.h): all three are exact in fp32 (one store, one addition, the same double formula
// rounded once), so the bound is 0 — normal_init on a GPU only up to CUDA's double log and cos,
// which the emulation takes from the host's libm.
#include "cuda_test_support.h"
#include "plait/kernels/cuda/normal_init.h"
#include "plait/kernels/cuda/vector_ops.h"
#include "plait/kernels/normal_init.h"
#include "plait/kernels/vector_ops.h"

namespace plait::kernels::cuda {
namespace {

using namespace plait::kernels::cuda::testing;

class CudaVectorOps : public CudaKernelTest {};

TEST_F(CudaVectorOps, FillWritesEveryElement) {
  const std::size_t n = 1031;  // not a multiple of the block
  DeviceBuffer<float> d(n);
  d.poison();
  fill(d.get(), n, 0.75f, ctx());
  sync();
  expect_close("fill", d.download(), std::vector<double>(n, 0.75), 0.0);
}

TEST_F(CudaVectorOps, AccumulateMatchesCpu) {
  const std::size_t n = 1031;
  auto dst = as<float>(random_vector(n, 61));
  const auto src = as<float>(random_vector(n, 62));
  DeviceBuffer<float> gdst(as_double(dst)), gsrc(as_double(src));
  kernels::accumulate(dst.data(), src.data(), n);
  accumulate(gdst.get(), gsrc.get(), n, ctx());
  sync();
  expect_close("accumulate", gdst.download(), as_double(dst), 0.0);
}

TEST_F(CudaVectorOps, NormalInitMatchesCpuBitwise) {
  const std::size_t n = 1031;
  const std::uint64_t key = 0x1234'5678'9ABC'DEF0ull;
  std::vector<float> cpu(n);
  kernels::normal_init(cpu.data(), n, 0.02, key);
  DeviceBuffer<float> d(n);
  d.poison();
  normal_init(d.get(), n, 0.02, key, ctx());
  sync();
  expect_close("normal_init", d.download(), as_double(cpu), 0.0);
}

}  // namespace
}  // namespace plait::kernels::cuda
