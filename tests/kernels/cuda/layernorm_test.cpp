// The CUDA layernorm and RMSNorm against the CPU kernels (kernels/layernorm.h, rmsnorm.h).
#include "plait/kernels/cuda/layernorm.h"

#include "cuda_test_support.h"
#include "plait/kernels/cuda/rmsnorm.h"
#include "plait/kernels/layernorm.h"
#include "plait/kernels/rmsnorm.h"

namespace plait::kernels::cuda {
namespace {

using namespace plait::kernels::cuda::testing;

template <typename T>
void check_layernorm(const Context& ctx, int n, int c) {
  using R = Reference<T>;
  const std::string name = std::string("layernorm ") + type_name(T{}) + " n=" + std::to_string(n) +
                           " c=" + std::to_string(c);
  const auto x = stored<T>(random_vector(std::size_t(n) * c, 1, 2.0));
  const auto w = stored<T>(random_vector(c, 2));
  const auto b = stored<T>(random_vector(c, 3));
  const auto dy = stored<T>(random_vector(std::size_t(n) * c, 4));
  const auto dres = stored<T>(random_vector(std::size_t(n) * c, 5));
  const auto dw0 = random_vector(c, 6), db0 = random_vector(c, 7);  // W accumulates into these

  // CPU reference.
  std::vector<R> out(x.size()), mean(n), rstd(n), dx(x.size()), dw = as<R>(dw0), db = as<R>(db0);
  const auto rx = as<R>(x), rw = as<R>(w), rb = as<R>(b), rdy = as<R>(dy), rdres = as<R>(dres);
  kernels::layernorm_forward<R>(out.data(), mean.data(), rstd.data(), rx.data(), rw.data(),
                                rb.data(), n, c);
  kernels::layernorm_backward_input<R>(dx.data(), rdres.data(), rdy.data(), rx.data(), rw.data(),
                                       mean.data(), rstd.data(), n, c);
  kernels::layernorm_backward_weight<R>(dw.data(), db.data(), rdy.data(), rx.data(), mean.data(),
                                        rstd.data(), n, c);

  // GPU, the backward input in place over dresidual (the aliasing the engine uses).
  DeviceBuffer<T> gx(x), gw(w), gb(b), gdy(dy), gout(x.size()), gdx(dres);
  DeviceBuffer<float> gmean(n), grstd(n), gdw(dw0), gdb(db0);
  gout.poison();
  gmean.poison();
  grstd.poison();
  layernorm_forward<T>(gout.get(), gmean.get(), grstd.get(), gx.get(), gw.get(), gb.get(), n, c,
                       kernels::kLayerNormEps, ctx);
  layernorm_backward_input<T>(gdx.get(), gdx.get(), gdy.get(), gx.get(), gw.get(), gmean.get(),
                              grstd.get(), n, c, ctx);
  layernorm_backward_weight<T>(gdw.get(), gdb.get(), gdy.get(), gx.get(), gmean.get(), grstd.get(),
                               n, c, ctx);
  ctx.synchronize();
  expect_close(name + " out", gout.download(), as_double(out), bound_for<T>(1));
  expect_close(name + " mean", gmean.download(), as_double(mean), kFp32Bound);
  expect_close(name + " rstd", grstd.download(), as_double(rstd), kFp32Bound);
  expect_close(name + " dinp", gdx.download(), as_double(dx), bound_for<T>(1));
  expect_close(name + " dweight", gdw.download(), as_double(dw), kFp32Bound);
  expect_close(name + " dbias", gdb.download(), as_double(db), kFp32Bound);
}

template <typename T>
void check_rmsnorm(const Context& ctx, int n, int c, double eps) {
  using R = Reference<T>;
  const std::string name = std::string("rmsnorm ") + type_name(T{}) + " n=" + std::to_string(n) +
                           " c=" + std::to_string(c);
  const auto x = stored<T>(random_vector(std::size_t(n) * c, 11, 2.0));
  const auto w = stored<T>(random_vector(c, 12));
  const auto dy = stored<T>(random_vector(std::size_t(n) * c, 13));
  const auto dw0 = random_vector(c, 14);

  std::vector<R> out(x.size()), rstd(n), dx(x.size()), dw = as<R>(dw0);
  const auto rx = as<R>(x), rw = as<R>(w), rdy = as<R>(dy);
  kernels::rmsnorm_forward<R>(out.data(), rstd.data(), rx.data(), rw.data(), n, c, eps);
  kernels::rmsnorm_backward_input<R>(dx.data(), nullptr, rdy.data(), rx.data(), rw.data(),
                                     rstd.data(), n, c);
  kernels::rmsnorm_backward_weight<R>(dw.data(), rdy.data(), rx.data(), rstd.data(), n, c);

  DeviceBuffer<T> gx(x), gw(w), gdy(dy), gout(x.size()), gdx(x.size());
  DeviceBuffer<float> grstd(n), gdw(dw0);
  gout.poison();
  gdx.poison();
  rmsnorm_forward<T>(gout.get(), grstd.get(), gx.get(), gw.get(), n, c, eps, ctx);
  rmsnorm_backward_input<T>(gdx.get(), nullptr, gdy.get(), gx.get(), gw.get(), grstd.get(), n, c,
                            ctx);
  rmsnorm_backward_weight<T>(gdw.get(), gdy.get(), gx.get(), grstd.get(), n, c, ctx);
  ctx.synchronize();
  expect_close(name + " out", gout.download(), as_double(out), bound_for<T>(1));
  expect_close(name + " rstd", grstd.download(), as_double(rstd), kFp32Bound);
  expect_close(name + " dinp", gdx.download(), as_double(dx), bound_for<T>(1));
  expect_close(name + " dweight", gdw.download(), as_double(dw), kFp32Bound);
}

class CudaNorm : public CudaKernelTest {};

// Shapes: rows not a multiple of the 8 rows per block, columns not a multiple of 32 (the column
// sums' tile) and GPT-2 small's 768.
TEST_F(CudaNorm, LayerNormMatchesCpuFp32) {
  check_layernorm<float>(ctx(), 13, 50);
  check_layernorm<float>(ctx(), 70, 768);
}
TEST_F(CudaNorm, LayerNormMatchesCpuBf16) {
  check_layernorm<bf16>(ctx(), 13, 50);
  check_layernorm<bf16>(ctx(), 70, 768);
}
TEST_F(CudaNorm, RmsNormMatchesCpuFp32) {
  check_rmsnorm<float>(ctx(), 13, 50, 1e-5);
  check_rmsnorm<float>(ctx(), 70, 256, 1e-6);
}
TEST_F(CudaNorm, RmsNormMatchesCpuBf16) {
  check_rmsnorm<bf16>(ctx(), 13, 50, 1e-5);
  check_rmsnorm<bf16>(ctx(), 70, 256, 1e-6);
}

}  // namespace
}  // namespace plait::kernels::cuda
