#pragma once
// The CUDA headers every file of the CUDA backend includes, or, in the CPU-emulated build of the
// kernels' tests (PLAIT_CUDA_EMULATION, tests/kernels/cuda/), the emulation of the subset of the
// CUDA runtime and cuBLASLt they use (emulation/cuda_emulation.h). The kernels' sources are the
// same in both builds; only this header differs.
#if defined(PLAIT_CUDA_EMULATION)
#include "plait/kernels/cuda/emulation/cuda_emulation.h"
#else
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#endif

namespace plait::kernels::cuda {

// The 16-bit storage type of mixed precision: bfloat16 (8 exponent bits like fp32, 8 significant
// bits), converted to fp32 for all arithmetic.
using bf16 = __nv_bfloat16;

}  // namespace plait::kernels::cuda
