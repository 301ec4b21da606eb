#include "plait/kernels/cuda/context.h"

#include <string>

#include "plait/kernels/cuda/cuda_check.h"

namespace plait::kernels::cuda {

Context::Context(std::size_t gemm_workspace_bytes) : workspace_bytes_(gemm_workspace_bytes) {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "Context: cudaGetDevice");
  check_cuda(
      cudaDeviceGetAttribute(&max_shared_bytes_, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
      "Context: cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
  check_cuda(cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, device),
             "Context: cudaDeviceGetAttribute(MultiProcessorCount)");
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "Context: stream");
  try {
    check_cublas(cublasLtCreate(&blas_), "Context: cublasLtCreate");
    if (workspace_bytes_ > 0) {
      check_cuda(cudaMalloc(&workspace_, workspace_bytes_),
                 "Context: cudaMalloc of the " + std::to_string(workspace_bytes_ >> 20) +
                     " MiB GEMM workspace");
    }
  } catch (...) {
    if (blas_) cublasLtDestroy(blas_);
    cudaStreamDestroy(stream_);
    throw;
  }
}

Context::~Context() {
  // Destructors must not throw: errors here (a context torn down after a device fault) are
  // ignored; the fault itself was reported by the call that met it.
  if (stream_) cudaStreamSynchronize(stream_);
  if (workspace_) cudaFree(workspace_);
  if (blas_) cublasLtDestroy(blas_);
  if (stream_) cudaStreamDestroy(stream_);
}

void Context::synchronize() const {
  check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

std::string cuda_unavailable_reason() {
  int count = 0;
  const cudaError_t code = cudaGetDeviceCount(&count);
  if (code != cudaSuccess) {
    // Clear the sticky "no device" error so later calls in the process report their own.
    cudaGetLastError();
    return std::string("cudaGetDeviceCount: ") + cudaGetErrorName(code) + ": " +
           cudaGetErrorString(code);
  }
  if (count == 0) return "cudaGetDeviceCount returned 0 devices";
  return "";
}

}  // namespace plait::kernels::cuda
