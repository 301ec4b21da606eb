#include "plait/kernels/cuda/gemm.h"

#include <string>

#include "plait/kernels/cuda/cuda_check.h"

namespace plait::kernels::cuda {
namespace {

template <typename T>
constexpr cudaDataType_t data_type();
template <>
constexpr cudaDataType_t data_type<float>() {
  return CUDA_R_32F;
}
template <>
constexpr cudaDataType_t data_type<bf16>() {
  return CUDA_R_16BF;
}

// The cuBLASLt descriptors of one call, destroyed on every path out.
struct Descriptors {
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  Descriptors() = default;
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
  ~Descriptors() {
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (matmul) cublasLtMatmulDescDestroy(matmul);
  }
};

std::string describe(bool trans_a, bool trans_b, int m, int n, int k, int lda, int ldb, int ldc) {
  return "gemm (row-major, " + std::string(trans_a ? "A^T" : "A") + " " + (trans_b ? "B^T" : "B") +
         ", m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
         ", lda=" + std::to_string(lda) + " ldb=" + std::to_string(ldb) +
         " ldc=" + std::to_string(ldc) + ")";
}

}  // namespace

// cuBLASLt is column-major. A row-major (r, c) matrix with leading dimension ld is, in the same
// memory, the column-major (c, r) matrix with that ld: its transpose. So the row-major product
// C = op(A) op(B) is the column-major product C^T = op(B)^T op(A)^T: call cuBLASLt with the
// operands swapped (its A is our B, its B our A), m and n swapped, and each operand described by
// its stored shape read column-major (rows and columns of the row-major stored matrix swapped),
// transposed exactly when ours is. The standard mapping (cuBLAS documentation, "row-major";
// llm.c's matmul_cublaslt does the same swap).
template <typename TIn, typename TOut>
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const TIn* a, int lda,
          const TIn* b, int ldb, float beta, TOut* c, int ldc, const Context& ctx) {
  if (m <= 0 || n <= 0) return;
  const std::string what = describe(trans_a, trans_b, m, n, k, lda, ldb, ldc);
  Descriptors d;
  check_cublas(cublasLtMatmulDescCreate(&d.matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F), what);
  const cublasOperation_t op_a = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's A = our B
  const cublasOperation_t op_b = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's B = our A
  check_cublas(
      cublasLtMatmulDescSetAttribute(d.matmul, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)),
      what);
  check_cublas(
      cublasLtMatmulDescSetAttribute(d.matmul, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)),
      what);
  // Our B is stored row-major (trans_b ? n : k) x (trans_b ? k : n): column-major swapped.
  check_cublas(
      cublasLtMatrixLayoutCreate(&d.a, data_type<TIn>(), trans_b ? k : n, trans_b ? n : k, ldb),
      what + ": layout of B");
  // Our A is stored row-major (trans_a ? k : m) x (trans_a ? m : k).
  check_cublas(
      cublasLtMatrixLayoutCreate(&d.b, data_type<TIn>(), trans_a ? m : k, trans_a ? k : m, lda),
      what + ": layout of A");
  // Our C (m, n) row-major is the column-major (n, m).
  check_cublas(cublasLtMatrixLayoutCreate(&d.c, data_type<TOut>(), n, m, ldc),
               what + ": layout of C");
  check_cublas(cublasLtMatmulPreferenceCreate(&d.preference), what);
  const std::size_t workspace = ctx.gemm_workspace_bytes();
  check_cublas(
      cublasLtMatmulPreferenceSetAttribute(d.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &workspace, sizeof(workspace)),
      what);
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  check_cublas(cublasLtMatmulAlgoGetHeuristic(ctx.blas(), d.matmul, d.a, d.b, d.c, d.c,
                                              d.preference, 1, &heuristic, &found),
               what + ": cublasLtMatmulAlgoGetHeuristic");
  if (found == 0) throw Error(what + ": cuBLASLt has no algorithm for these operands");
  check_cublas(cublasLtMatmul(ctx.blas(), d.matmul, &alpha, b, d.a, a, d.b, &beta, c, d.c, c, d.c,
                              &heuristic.algo, ctx.gemm_workspace(), workspace, ctx.stream()),
               what + ": cublasLtMatmul");
}

template void gemm<float, float>(bool, bool, int, int, int, float, const float*, int, const float*,
                                 int, float, float*, int, const Context&);
template void gemm<bf16, bf16>(bool, bool, int, int, int, float, const bf16*, int, const bf16*, int,
                               float, bf16*, int, const Context&);
template void gemm<bf16, float>(bool, bool, int, int, int, float, const bf16*, int, const bf16*,
                                int, float, float*, int, const Context&);

}  // namespace plait::kernels::cuda
