// The part of cuBLASLt that plait's gemm (src/plait/kernels/cuda/gemm.cpp) uses, emulated on the
// CPU: descriptors that keep what they are told, the operand checks cuBLASLt makes (a layout
// whose shape does not match op(A) (m,k), op(B) (k,n), C and D (m,n) is
// CUBLAS_STATUS_INVALID_VALUE), and the column-major product D = alpha op(A) op(B) + beta C
// accumulated in double (C is not read when beta is 0, as in cuBLAS). This checks the row-major to
// column-major mapping of gemm.cpp against the CPU reference; cuBLASLt's own arithmetic is checked
// on a GPU.
#include <cstdint>
#include <cstring>

#include "plait/kernels/cuda/emulation/cuda_emulation.h"

struct cublasLtContext {};

namespace {

struct MatmulDesc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasOperation_t trans_a = CUBLAS_OP_N;
  cublasOperation_t trans_b = CUBLAS_OP_N;
};
struct Layout {
  cudaDataType_t type;
  std::uint64_t rows, cols;
  std::int64_t ld;
};
// The handles are the emulation's own structs, cast to cuBLASLt's opaque pointer types (which are
// never dereferenced as such).
MatmulDesc& desc_of(cublasLtMatmulDesc_t d) { return *reinterpret_cast<MatmulDesc*>(d); }
const Layout& layout_of(cublasLtMatrixLayout_t l) { return *reinterpret_cast<const Layout*>(l); }

double load(const void* base, cudaDataType_t type, std::size_t index) {
  if (type == CUDA_R_32F) return static_cast<const float*>(base)[index];
  return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[index]);
}
void store(void* base, cudaDataType_t type, std::size_t index, double value) {
  if (type == CUDA_R_32F) {
    static_cast<float*>(base)[index] = static_cast<float>(value);
  } else {
    static_cast<__nv_bfloat16*>(base)[index] = __float2bfloat16(static_cast<float>(value));
  }
}

// Element (i, j) of op(X) for a column-major X of leading dimension ld.
double element(const void* x, const Layout& l, cublasOperation_t op, std::uint64_t i,
               std::uint64_t j) {
  const std::uint64_t r = op == CUBLAS_OP_N ? i : j, c = op == CUBLAS_OP_N ? j : i;
  return load(x, l.type, static_cast<std::size_t>(r + c * static_cast<std::uint64_t>(l.ld)));
}

}  // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(new MatmulDesc{compute, scale});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete reinterpret_cast<MatmulDesc*>(desc);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attribute,
                                              const void* buffer, size_t bytes) {
  if (bytes != sizeof(cublasOperation_t)) return CUBLAS_STATUS_INVALID_VALUE;
  if (attribute == CUBLASLT_MATMUL_DESC_TRANSA) {
    std::memcpy(&desc_of(desc).trans_a, buffer, bytes);
  } else if (attribute == CUBLASLT_MATMUL_DESC_TRANSB) {
    std::memcpy(&desc_of(desc).trans_b, buffer, bytes);
  } else {
    return CUBLAS_STATUS_NOT_SUPPORTED;  // no epilogues in plait's GEMMs
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (ld < static_cast<int64_t>(rows) || ld <= 0) return CUBLAS_STATUS_INVALID_VALUE;
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(new Layout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete reinterpret_cast<Layout*>(layout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  *pref = new cublasLtMatmulPreferenceOpaque_t{};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t,
                                                    cublasLtMatmulPreferenceAttributes_t,
                                                    const void*, size_t) {
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t,
                                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                              cublasLtMatmulPreference_t, int requested,
                                              cublasLtMatmulHeuristicResult_t results[],
                                              int* returned) {
  *returned = 0;
  if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  results[0] = cublasLtMatmulHeuristicResult_t{};
  results[0].state = CUBLAS_STATUS_SUCCESS;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t compute_desc,
                              const void* alpha, const void* a, cublasLtMatrixLayout_t a_desc,
                              const void* b, cublasLtMatrixLayout_t b_desc, const void* beta,
                              const void* c, cublasLtMatrixLayout_t c_desc, void* d,
                              cublasLtMatrixLayout_t d_desc, const cublasLtMatmulAlgo_t*, void*,
                              size_t, cudaStream_t) {
  const MatmulDesc& op = desc_of(compute_desc);
  const Layout &la = layout_of(a_desc), &lb = layout_of(b_desc), &lc = layout_of(c_desc),
               &ld = layout_of(d_desc);
  if (op.compute != CUBLAS_COMPUTE_32F || op.scale != CUDA_R_32F)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  // The type combinations plait uses: all fp32, or bf16 A and B with a bf16 or fp32 C = D.
  const bool types_ok =
      la.type == lb.type && lc.type == ld.type &&
      ((la.type == CUDA_R_32F && lc.type == CUDA_R_32F) ||
       (la.type == CUDA_R_16BF && (lc.type == CUDA_R_16BF || lc.type == CUDA_R_32F)));
  if (!types_ok) return CUBLAS_STATUS_NOT_SUPPORTED;
  // op(A) is (m, k), op(B) (k, n), C and D (m, n).
  const std::uint64_t m = op.trans_a == CUBLAS_OP_N ? la.rows : la.cols;
  const std::uint64_t k = op.trans_a == CUBLAS_OP_N ? la.cols : la.rows;
  const std::uint64_t kb = op.trans_b == CUBLAS_OP_N ? lb.rows : lb.cols;
  const std::uint64_t n = op.trans_b == CUBLAS_OP_N ? lb.cols : lb.rows;
  if (kb != k || lc.rows != m || lc.cols != n || ld.rows != m || ld.cols != n || lc.ld != ld.ld) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const double al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  for (std::uint64_t j = 0; j < n; ++j) {
    for (std::uint64_t i = 0; i < m; ++i) {
      double acc = 0;
      for (std::uint64_t l = 0; l < k; ++l) {
        acc += element(a, la, op.trans_a, i, l) * element(b, lb, op.trans_b, l, j);
      }
      const std::size_t at = static_cast<std::size_t>(i + j * static_cast<std::uint64_t>(ld.ld));
      double value = al * acc;
      if (be != 0) value += be * load(c, lc.type, at);
      store(d, ld.type, at, value);
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
