#pragma once
// What the bf16 GEMMs (bf16_matmul.h) need from oneDNN, held once per backend: the CPU engine and
// stream, a bounded LRU cache of matmul primitives, and the workspace they (or the fallback)
// compute in. oneDNN is named only in onednn_context.cpp; the rest of plait sees plain types.
//
// Path. oneDNN 2.6's matmul is fast in bf16 only where the CPU multiplies bf16 natively
// (AVX512_BF16 or AMX: brgemm kernels, about 2x sgemm); it refuses bf16 on AVX2-only CPUs and runs
// it slowly on AVX-512 without BF16 (about 75 against sgemm's 194 GFLOP/s on 2 cores). So the path
// is decided once per context from the ISA oneDNN reports: oneDNN where that ISA has native bf16,
// else the widened-sgemm fallback (widened_sgemm.h): bf16 operands widened to fp32 (exact) in
// bounded panels and multiplied with OpenBLAS. ONEDNN_MAX_CPU_ISA (read by oneDNN at its first
// use) lowers the ISA, so the fallback can be chosen from the environment too.
//
// Shapes. Primitives are created for fixed shapes: created with runtime dimensions
// (DNNL_RUNTIME_DIM_VAL) oneDNN 2.6 drops from its brgemm kernels to its generic gemm (measured on
// AVX512_BF16, 2 threads: 20-95 against 125-180 GFLOP/s on GPT-2 small's shapes), and a creation
// costs only ~0.5-1 ms. Seq1F1B segments, per-micro-batch lengths and tensor-parallel shards make
// many shapes, so the cache is bounded (least recently used out); creations and their time are
// counted for the benchmark.
//
// Memory. The scratchpad is user-managed (dnnl::scratchpad_mode::user): oneDNN allocates
// nothing of its own per call; its scratchpad, and the fallback's fp32 panels, live in one
// grow-only workspace block from the given MemorySpace, charged to the given MemoryTracker
// category, so the memory categories stay true.
//
// Not thread-safe: one context per compute thread. A primitive is created for the OpenMP
// thread count at its creation (part of its key), as oneDNN sizes its scratchpad per thread.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "plait/core/bf16.h"
#include "plait/core/memory_category.h"
#include "plait/core/memory_space.h"
#include "plait/core/memory_tracker.h"

namespace plait::kernels {

enum class Bf16GemmPath { kOneDnn, kWidenedSgemm };
std::string_view name_of(Bf16GemmPath path);  // "onednn" | "widened-sgemm"

// One row-major matmul dst (m,n) [+]= A (m,k) @ B (k,n) [+ bias (n)] [+ residual (m,n)], fp32
// accumulation, one rounding to dst's type at the end. Operands are dense (leading dimension the
// stored row length). A is stored (m,k), or (k,m) when a_transposed; B (k,n), or (n,k) when
// b_transposed. accumulate adds dst's old value (oneDNN's sum post-op: in fp32, before the one
// rounding). The key of the primitive cache.
struct Bf16MatmulShape {
  int m = 0, n = 0, k = 0;
  bool a_transposed = false, b_transposed = false;
  bool dst_fp32 = false;  // fp32 dst (weight gradients), else bf16
  bool bias = false;      // bf16 bias (n), broadcast over rows
  bool residual = false;  // bf16 (m,n) added (oneDNN's binary-add post-op)
  bool accumulate = false;
  auto operator<=>(const Bf16MatmulShape&) const = default;
};

struct Bf16MatmulArgs {
  const bf16* a = nullptr;
  const bf16* b = nullptr;
  void* dst = nullptr;  // bf16* or float* (dst_fp32)
  const bf16* bias = nullptr;
  const bf16* residual = nullptr;
};

struct OneDnnContextOptions {
  std::size_t cache_capacity = 64;  // primitives kept (>= 1)
  bool force_fallback = false;      // the widened-sgemm path whatever the ISA (tests)
};

class OneDnnContext {
 public:
  // The workspace comes from `memory` and is charged to `tracker` under `category`.
  OneDnnContext(MemorySpace& memory, MemoryTracker& tracker, MemoryCategory category,
                OneDnnContextOptions options = {});
  ~OneDnnContext();
  OneDnnContext(const OneDnnContext&) = delete;
  OneDnnContext& operator=(const OneDnnContext&) = delete;

  Bf16GemmPath path() const { return path_; }
  // The ISA oneDNN dispatches to (dnnl::get_effective_cpu_isa), e.g. "avx512_core_bf16", and
  // whether it multiplies bf16 natively (avx512_core_bf16 or avx512_core_amx).
  const std::string& isa() const { return isa_; }
  bool native_bf16() const { return native_bf16_; }
  // "oneDNN 2.6.3, ISA avx512_core_bf16 (native bf16), path onednn": the benchmark's line.
  std::string describe() const;

  // Runs one matmul through oneDNN (path() == kOneDnn only; Error otherwise), creating and
  // caching its primitive on first use.
  void execute(const Bf16MatmulShape& shape, const Bf16MatmulArgs& args);

  // At least `bytes` of workspace (64-byte aligned), valid until the next call that may grow
  // it; grows only, charged to the tracker first (OutOfMemoryError leaves the old block).
  void* workspace(std::size_t bytes);
  std::size_t workspace_bytes() const { return workspace_bytes_; }
  MemoryCategory category() const { return category_; }

  std::size_t cache_capacity() const { return cache_capacity_; }
  std::size_t cached_primitives() const;
  std::size_t primitive_creations() const { return creations_; }
  double primitive_creation_seconds() const { return creation_seconds_; }

 private:
  struct Cache;
  MemorySpace& memory_;
  MemoryTracker& tracker_;
  MemoryCategory category_;
  std::size_t cache_capacity_;
  Bf16GemmPath path_;
  std::string isa_;
  bool native_bf16_ = false;
  std::unique_ptr<Cache> cache_;  // engine, stream and primitives (onednn_context.cpp)
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  std::size_t creations_ = 0;
  double creation_seconds_ = 0.0;
};

}  // namespace plait::kernels
