#pragma once
// Row-major GEMM over float (cblas_sgemm) or double (cblas_dgemm, used by the tests' reference
// instantiations): C (m,n) = alpha * op(A) (m,k) @ op(B) (k,n) + beta * C.
// Called outside an OpenMP region it uses all OpenMP threads (OpenBLAS's OpenMP build); called
// inside one it runs on the calling thread, which is how attention runs one head per thread.
namespace plait::kernels {

template <typename T>
void gemm(bool trans_a, bool trans_b, int m, int n, int k, T alpha, const T* a, int lda,
          const T* b, int ldb, T beta, T* c, int ldc);

}  // namespace plait::kernels
