#include "plait/kernels/blas.h"

#include <cblas.h>

namespace plait::kernels {
namespace {

CBLAS_TRANSPOSE op(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

}  // namespace

template <>
void gemm<float>(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                 int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, op(trans_a), op(trans_b), m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}

template <>
void gemm<double>(bool trans_a, bool trans_b, int m, int n, int k, double alpha, const double* a,
                  int lda, const double* b, int ldb, double beta, double* c, int ldc) {
  if (m == 0 || n == 0) return;
  cblas_dgemm(CblasRowMajor, op(trans_a), op(trans_b), m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}

}  // namespace plait::kernels
