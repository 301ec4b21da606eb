// The CUDA linear layer (cuBLASLt GEMMs) against the CPU kernel (kernels/matmul.h).
#include "plait/kernels/cuda/matmul.h"

#include "cuda_test_support.h"
#include "plait/kernels/matmul.h"

namespace plait::kernels::cuda {
namespace {

using namespace plait::kernels::cuda::testing;

struct Options {
  bool bias = true;
  bool residual = false;
  bool accumulate = false;  // backward input: += instead of =
};

template <typename T>
void check_matmul(const Context& ctx, int n, int c, int oc, Options o) {
  using R = Reference<T>;
  const std::string name = std::string("matmul ") + type_name(T{}) + " n=" + std::to_string(n) +
                           " c=" + std::to_string(c) + " oc=" + std::to_string(oc) +
                           (o.bias ? " bias" : "") + (o.residual ? " residual" : "") +
                           (o.accumulate ? " accumulate" : "");
  const auto x = stored<T>(random_vector(std::size_t(n) * c, 21));
  const auto w = stored<T>(random_vector(std::size_t(oc) * c, 22, 0.1));
  const auto b = stored<T>(random_vector(oc, 23));
  const auto res = stored<T>(random_vector(std::size_t(n) * oc, 24));
  const auto dy = stored<T>(random_vector(std::size_t(n) * oc, 25));
  const auto dx0 = stored<T>(random_vector(std::size_t(n) * c, 26));
  const auto dw0 = random_vector(std::size_t(oc) * c, 27), db0 = random_vector(oc, 28);

  std::vector<R> out(std::size_t(n) * oc), dx = as<R>(dx0), dw = as<R>(dw0), db = as<R>(db0);
  const auto rx = as<R>(x), rw = as<R>(w), rb = as<R>(b), rres = as<R>(res), rdy = as<R>(dy);
  kernels::matmul_forward<R>(out.data(), rx.data(), rw.data(), o.bias ? rb.data() : nullptr,
                             o.residual ? rres.data() : nullptr, n, c, oc);
  kernels::matmul_backward_input<R>(dx.data(), rdy.data(), rw.data(), n, c, oc, o.accumulate);
  kernels::matmul_backward_weight<R>(dw.data(), o.bias ? db.data() : nullptr, rdy.data(), rx.data(),
                                     n, c, oc);

  DeviceBuffer<T> gx(x), gw(w), gb(b), gres(res), gdy(dy), gout(out.size()), gdx(dx0);
  DeviceBuffer<float> gdw(dw0), gdb(db0);
  gout.poison();
  if (!o.accumulate) gdx.poison();  // beta = 0: the old contents must not be read
  matmul_forward<T>(gout.get(), gx.get(), gw.get(), o.bias ? gb.get() : nullptr,
                    o.residual ? gres.get() : nullptr, n, c, oc, ctx);
  matmul_backward_input<T>(gdx.get(), gdy.get(), gw.get(), n, c, oc, o.accumulate, ctx);
  matmul_backward_weight<T>(gdw.get(), o.bias ? gdb.get() : nullptr, gdy.get(), gx.get(), n, c, oc,
                            ctx);
  ctx.synchronize();
  // bf16 roundings: out 2 with a pre-fill (bias + residual rounded, then the result), else 1;
  // dinp 1 (the old value is a bf16 input, the sum rounded once).
  const int out_roundings = (o.bias || o.residual) ? 2 : 1;
  expect_close(name + " out", gout.download(), as_double(out), bound_for<T>(out_roundings));
  expect_close(name + " dinp", gdx.download(), as_double(dx), bound_for<T>(1));
  expect_close(name + " dweight", gdw.download(), as_double(dw), kFp32Bound);
  if (o.bias) expect_close(name + " dbias", gdb.download(), as_double(db), kFp32Bound);
}

class CudaMatmul : public CudaKernelTest {};

// Odd sizes (no multiple of 8 or 16 anywhere), then a GPT-2 projection's shape.
TEST_F(CudaMatmul, MatchesCpuFp32) {
  check_matmul<float>(ctx(), 7, 5, 3, {});
  check_matmul<float>(ctx(), 37, 29, 45, {.bias = true, .residual = true, .accumulate = true});
  check_matmul<float>(ctx(), 33, 17, 21, {.bias = false, .residual = true});
  check_matmul<float>(ctx(), 64, 96, 288, {.bias = false});
}
TEST_F(CudaMatmul, MatchesCpuBf16) {
  check_matmul<bf16>(ctx(), 7, 5, 3, {});
  check_matmul<bf16>(ctx(), 37, 29, 45, {.bias = true, .residual = true, .accumulate = true});
  check_matmul<bf16>(ctx(), 64, 96, 288, {.bias = false});
}

}  // namespace
}  // namespace plait::kernels::cuda
