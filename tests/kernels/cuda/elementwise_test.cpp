// The CUDA GELU, SwiGLU and rotary kernels against the CPU kernels (kernels/gelu.h, swiglu.h,
// rotary.h).
#include "cuda_test_support.h"
#include "plait/kernels/cuda/gelu.h"
#include "plait/kernels/cuda/rotary.h"
#include "plait/kernels/cuda/swiglu.h"
#include "plait/kernels/gelu.h"
#include "plait/kernels/rotary.h"
#include "plait/kernels/swiglu.h"

namespace plait::kernels::cuda {
namespace {

using namespace plait::kernels::cuda::testing;

template <typename T>
void check_gelu(const Context& ctx, std::size_t n) {
  using R = Reference<T>;
  const std::string name = std::string("gelu ") + type_name(T{}) + " n=" + std::to_string(n);
  const auto x = stored<T>(random_vector(n, 31, 3.0));
  const auto dy = stored<T>(random_vector(n, 32));
  std::vector<R> out(n), dx = as<R>(dy);
  const auto rx = as<R>(x);
  kernels::gelu_forward<R>(out.data(), rx.data(), n);
  kernels::gelu_backward<R>(dx.data(), rx.data(), dx.data(), n);  // in place, as the engine
  DeviceBuffer<T> gx(x), gout(n), gdx(dy);
  gout.poison();
  gelu_forward<T>(gout.get(), gx.get(), n, ctx);
  gelu_backward<T>(gdx.get(), gx.get(), gdx.get(), n, ctx);
  ctx.synchronize();
  expect_close(name + " out", gout.download(), as_double(out), bound_for<T>(1));
  expect_close(name + " dinp", gdx.download(), as_double(dx), bound_for<T>(1));
}

template <typename T>
void check_swiglu(const Context& ctx, int n, int f) {
  using R = Reference<T>;
  const std::string name = std::string("swiglu ") + type_name(T{}) + " n=" + std::to_string(n) +
                           " f=" + std::to_string(f);
  const auto gu = stored<T>(random_vector(std::size_t(n) * 2 * f, 33, 3.0));
  const auto dy = stored<T>(random_vector(std::size_t(n) * f, 34));
  std::vector<R> out(std::size_t(n) * f), dgu(gu.size());
  const auto rgu = as<R>(gu), rdy = as<R>(dy);
  kernels::swiglu_forward<R>(out.data(), rgu.data(), n, f);
  kernels::swiglu_backward<R>(dgu.data(), rdy.data(), rgu.data(), n, f);
  DeviceBuffer<T> ggu(gu), gdy(dy), gout(out.size()), gdgu(gu.size());
  gout.poison();
  gdgu.poison();
  swiglu_forward<T>(gout.get(), ggu.get(), n, f, ctx);
  swiglu_backward<T>(gdgu.get(), gdy.get(), ggu.get(), n, f, ctx);
  ctx.synchronize();
  expect_close(name + " out", gout.download(), as_double(out), bound_for<T>(1));
  expect_close(name + " dgate_up", gdgu.download(), as_double(dgu), bound_for<T>(1));
}

// Rotates the first heads * head_dim columns of rows of row_stride (the K half of a K/V block
// when row_stride is twice that), forward and backward, at positions pos0 + t.
template <typename T>
void check_rotary(const Context& ctx, int batch, int s, int heads, int head_dim, int row_stride,
                  int pos0, double theta) {
  using R = Reference<T>;
  const std::string name = std::string("rotary ") + type_name(T{}) +
                           " d=" + std::to_string(head_dim) + " pos0=" + std::to_string(pos0) +
                           " theta=" + std::to_string(theta);
  const auto x = stored<T>(random_vector(std::size_t(batch) * s * row_stride, 35));
  std::vector<R> fwd = as<R>(x), bwd = as<R>(x);
  kernels::rotary_forward<R>(fwd.data(), batch, s, heads, head_dim, row_stride, pos0, theta);
  kernels::rotary_backward<R>(bwd.data(), batch, s, heads, head_dim, row_stride, pos0, theta);
  DeviceBuffer<T> gf(x), gb(x);
  rotary_forward<T>(gf.get(), batch, s, heads, head_dim, row_stride, pos0, theta, ctx);
  rotary_backward<T>(gb.get(), batch, s, heads, head_dim, row_stride, pos0, theta, ctx);
  ctx.synchronize();
  // Columns past heads * head_dim are untouched on both: they compare exactly.
  expect_close(name + " forward", gf.download(), as_double(fwd), bound_for<T>(1));
  expect_close(name + " backward", gb.download(), as_double(bwd), bound_for<T>(1));
}

class CudaElementwise : public CudaKernelTest {};

TEST_F(CudaElementwise, GeluMatchesCpuFp32) {
  check_gelu<float>(ctx(), 1);
  check_gelu<float>(ctx(), 3001);
}
TEST_F(CudaElementwise, GeluMatchesCpuBf16) { check_gelu<bf16>(ctx(), 3001); }
TEST_F(CudaElementwise, SwigluMatchesCpuFp32) { check_swiglu<float>(ctx(), 9, 37); }
TEST_F(CudaElementwise, SwigluMatchesCpuBf16) { check_swiglu<bf16>(ctx(), 9, 37); }
TEST_F(CudaElementwise, RotaryMatchesCpuFp32) {
  check_rotary<float>(ctx(), 2, 7, 3, 8, 24, 0, 100.0);
  check_rotary<float>(ctx(), 2, 5, 2, 16, 64, 1003, 10000.0);  // K half of (2 heads K, 2 V)
  check_rotary<float>(ctx(), 1, 3, 1, 128, 128, 37, 500000.0);
}
TEST_F(CudaElementwise, RotaryMatchesCpuBf16) {
  check_rotary<bf16>(ctx(), 2, 5, 2, 16, 64, 1003, 10000.0);
}

TEST_F(CudaElementwise, RotaryRejectsOddHeadDim) {
  DeviceBuffer<float> x(64);
  EXPECT_THROW(rotary_forward<float>(x.get(), 1, 2, 2, 7, 16, 0, 1e4, ctx()), plait::Error);
}

}  // namespace
}  // namespace plait::kernels::cuda
