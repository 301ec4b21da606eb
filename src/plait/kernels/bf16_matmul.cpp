#include "plait/kernels/bf16_matmul.h"

#include <string>

#include "plait/core/error.h"
#include "plait/kernels/column_sums.h"
#include "plait/kernels/widened_sgemm.h"

namespace plait::kernels {
namespace {

void check_dims(const char* kernel, int n, int c, int oc) {
  if (n < 0 || c < 0 || oc < 0) {
    throw Error(std::string(kernel) + ": negative size (n " + std::to_string(n) + ", c " +
                std::to_string(c) + ", oc " + std::to_string(oc) + ")");
  }
}

// One matmul on the context's path; an empty result is nothing to do.
void run(OneDnnContext& context, const char* kernel, const Bf16MatmulShape& shape,
         const Bf16MatmulArgs& args) {
  if (shape.m == 0 || shape.n == 0) return;
  if (shape.k == 0) throw Error(std::string(kernel) + ": zero reduction length with a non-empty result");
  if (context.path() == Bf16GemmPath::kOneDnn) {
    context.execute(shape, args);
  } else {
    widened_sgemm(context, shape, args);
  }
}

}  // namespace

void matmul_forward_bf16(OneDnnContext& context, bf16* out, const bf16* inp, const bf16* weight,
                         const bf16* bias, const bf16* residual, int n, int c, int oc) {
  check_dims("matmul_forward_bf16", n, c, oc);
  Bf16MatmulShape s;
  s.m = n;
  s.n = oc;
  s.k = c;
  s.b_transposed = true;  // weight^T: (C, OC) read from the (OC, C) rows
  s.bias = bias != nullptr;
  s.residual = residual != nullptr;
  run(context, "matmul_forward_bf16", s, {inp, weight, out, bias, residual});
}

void matmul_backward_input_bf16(OneDnnContext& context, bf16* dinp, const bf16* dout,
                                const bf16* weight, int n, int c, int oc, bool accumulate) {
  check_dims("matmul_backward_input_bf16", n, c, oc);
  Bf16MatmulShape s;
  s.m = n;
  s.n = c;
  s.k = oc;
  s.accumulate = accumulate;
  run(context, "matmul_backward_input_bf16", s, {dout, weight, dinp, nullptr, nullptr});
}

void matmul_forward_bf16_fp32(OneDnnContext& context, float* out, const bf16* inp, const bf16* weight,
                              int n, int c, int oc) {
  check_dims("matmul_forward_bf16_fp32", n, c, oc);
  Bf16MatmulShape s;
  s.m = n;
  s.n = oc;
  s.k = c;
  s.b_transposed = true;
  s.dst_fp32 = true;
  run(context, "matmul_forward_bf16_fp32", s, {inp, weight, out, nullptr, nullptr});
}

void matmul_backward_input_bf16_fp32(OneDnnContext& context, float* dinp, const bf16* dout,
                                     const bf16* weight, int n, int c, int oc, bool accumulate) {
  check_dims("matmul_backward_input_bf16_fp32", n, c, oc);
  Bf16MatmulShape s;
  s.m = n;
  s.n = c;
  s.k = oc;
  s.dst_fp32 = true;
  s.accumulate = accumulate;
  run(context, "matmul_backward_input_bf16_fp32", s, {dout, weight, dinp, nullptr, nullptr});
}

void matmul_backward_weight_bf16(OneDnnContext& context, float* dweight, float* dbias,
                                 const bf16* dout, const bf16* inp, int n, int c, int oc) {
  check_dims("matmul_backward_weight_bf16", n, c, oc);
  if (n == 0) return;  // no rows: nothing to add
  Bf16MatmulShape s;
  s.m = oc;
  s.n = c;
  s.k = n;
  s.a_transposed = true;  // dout^T: (OC, N) read from the (N, OC) rows
  s.dst_fp32 = true;
  s.accumulate = true;
  run(context, "matmul_backward_weight_bf16", s, {dout, inp, dweight, nullptr, nullptr});
  if (dbias != nullptr) add_column_sums(dbias, dout, n, oc);
}

}  // namespace plait::kernels
