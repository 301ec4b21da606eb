#pragma once
// CUDA and cuBLAS return codes to plait::Error, naming the call that failed:
//   "attention_forward: cudaErrorInvalidValue: invalid argument".
#include <string>

#include "plait/core/error.h"
#include "plait/kernels/cuda/cuda_api.h"

namespace plait::kernels::cuda {

inline void check_cuda(cudaError_t code, const std::string& what) {
  if (code != cudaSuccess) {
    throw Error(what + ": " + cudaGetErrorName(code) + ": " + cudaGetErrorString(code));
  }
}

inline void check_cublas(cublasStatus_t code, const std::string& what) {
  if (code != CUBLAS_STATUS_SUCCESS) {
    throw Error(what + ": cuBLAS status " + std::to_string(static_cast<int>(code)));
  }
}

}  // namespace plait::kernels::cuda
