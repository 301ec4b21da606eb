#pragma once
// What every CUDA launcher needs besides its buffers: the stream it runs on, the cuBLASLt handle
// and the GEMM workspace, and the device's limits (multiprocessors, shared memory per block). One
// Context per stream; launchers only enqueue work on it (asynchronous, like every CUDA call), so
// results are read after synchronize().
#include <cstddef>
#include <string>

#include "plait/kernels/cuda/cuda_api.h"

namespace plait::kernels::cuda {

// cuBLASLt's workspace: NVIDIA recommends 32 MiB on Hopper for its fastest GEMM kernels
// (cuBLAS documentation, cublasLtMatmul's workspace), where 4 MiB serves older GPUs.
inline constexpr std::size_t kGemmWorkspaceBytes = std::size_t{32} << 20;

class Context {
 public:
  // Creates a stream of its own (non-blocking with respect to the legacy default stream), the
  // cuBLASLt handle and the workspace, on the current device. Throws plait::Error naming the
  // call when CUDA fails (no device, out of memory).
  explicit Context(std::size_t gemm_workspace_bytes = kGemmWorkspaceBytes);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  cudaStream_t stream() const { return stream_; }
  cublasLtHandle_t blas() const { return blas_; }
  void* gemm_workspace() const { return workspace_; }
  std::size_t gemm_workspace_bytes() const { return workspace_bytes_; }
  // The most dynamic shared memory one block may opt into (cudaDevAttrMaxSharedMemoryPerBlockOptin:
  // 227 KiB on Hopper, 163 KiB on the A100).
  int max_shared_bytes() const { return max_shared_bytes_; }
  int multiprocessors() const { return multiprocessors_; }

  // Waits until the stream's work is done; throws the first asynchronous error.
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t blas_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  int max_shared_bytes_ = 0;
  int multiprocessors_ = 0;
};

// Why no CUDA device can be used here ("cudaGetDeviceCount: cudaErrorNoDevice: no CUDA-capable
// device is detected", "no devices"), or "" when device 0 can be used. The GPU tests skip with it.
std::string cuda_unavailable_reason();

}  // namespace plait::kernels::cuda
