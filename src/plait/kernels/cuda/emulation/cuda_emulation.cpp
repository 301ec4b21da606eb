#include "plait/kernels/cuda/emulation/cuda_emulation.h"

#include <ucontext.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "plait/core/error.h"

#if defined(__SANITIZE_ADDRESS__)
// AddressSanitizer must be told about stack switches (sanitizer/common_interface_defs.h).
extern "C" void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom,
                                               std::size_t size);
extern "C" void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old,
                                                std::size_t* size_old);
#endif

namespace plait::cuda_emulation {
namespace {

// What the emulated device reports: an H200's multiprocessors and opt-in shared memory.
constexpr int kMultiprocessors = 132;
constexpr int kMaxSharedOptin = 232448;
constexpr int kMaxThreadsPerBlock = 1024;
constexpr std::size_t kStackBytes = 256 * 1024;
constexpr unsigned char kPoison = 0xFF;  // every byte 0xFF: NaN as fp32 and as bf16

struct Barrier {
  int arrived = 0;
  std::uint64_t generation = 0;
};

struct Fiber {
  ucontext_t context;
  std::unique_ptr<char[]> stack;
  uint3 index{};
  bool done = false;
  void* fake_stack = nullptr;
};

// The block being run and its threads.
struct Block {
  const char* name = "";
  const std::function<void()>* body = nullptr;
  std::vector<Fiber> fibers;
  int threads = 0;
  int current = -1;
  bool progress = false;
  Barrier block_barrier;
  std::vector<Barrier> warp_barriers;
  std::vector<int> warp_sizes;
  std::vector<unsigned char> exchange_slots;  // 32 lanes x 8 bytes per warp
  std::vector<unsigned char> shared;
  ucontext_t scheduler;
  const void* scheduler_bottom = nullptr;
  std::size_t scheduler_size = 0;
};

Block* running = nullptr;
cudaError_t last_error = cudaSuccess;

// An error inside a thread of a kernel: an exception cannot leave a fiber, so the emulation
// prints it and stops the process (the test then fails with this message).
[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "CUDA emulation: %s\n", message.c_str());
  std::abort();
}

Block& block() {
  if (running == nullptr) fail("a device function was called outside a kernel launch");
  return *running;
}

Fiber& fiber() { return block().fibers[static_cast<std::size_t>(block().current)]; }

// Switches from the running fiber to the scheduler; returns when the scheduler resumes it.
void to_scheduler(bool final) {
  Block& b = block();
  Fiber& f = fiber();
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(final ? nullptr : &f.fake_stack, b.scheduler_bottom,
                                 b.scheduler_size);
#endif
  swapcontext(&f.context, &b.scheduler);
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(f.fake_stack, &b.scheduler_bottom, &b.scheduler_size);
#endif
  (void) final;
}

void fiber_entry() {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(nullptr, &block().scheduler_bottom, &block().scheduler_size);
#endif
  (*block().body)();
  fiber().done = true;
  block().progress = true;
  to_scheduler(true);
}

// Arrives at `barrier` of `participants` threads and yields until all have arrived.
void wait_at(Barrier& barrier, int participants) {
  Block& b = block();
  const std::uint64_t generation = barrier.generation;
  b.progress = true;
  if (++barrier.arrived == participants) {
    barrier.arrived = 0;
    ++barrier.generation;
    return;
  }
  while (barrier.generation == generation) to_scheduler(false);
}

int linear_thread(const uint3& t, const dim3& block_dim) {
  return static_cast<int>(t.x + block_dim.x * (t.y + block_dim.y * t.z));
}

void run_block(Block& b, const dim3& block_dim) {
  for (int t = 0; t < b.threads; ++t) {
    Fiber& f = b.fibers[static_cast<std::size_t>(t)];
    f.done = false;
    f.fake_stack = nullptr;
    f.index = uint3{static_cast<unsigned>(t) % block_dim.x,
                    (static_cast<unsigned>(t) / block_dim.x) % block_dim.y,
                    static_cast<unsigned>(t) / (block_dim.x * block_dim.y)};
    if (!f.stack) f.stack = std::make_unique<char[]>(kStackBytes);
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack.get();
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = nullptr;
    makecontext(&f.context, fiber_entry, 0);
  }
  b.block_barrier = {};
  std::fill(b.warp_barriers.begin(), b.warp_barriers.end(), Barrier{});
  std::fill(b.shared.begin(), b.shared.end(), kPoison);
  int live = b.threads;
  // Threads run in increasing order in even blocks and decreasing order in odd ones, so that a
  // missing barrier between a write and a read of shared memory by different threads shows up in
  // one of the two (the reader then runs before the writer).
  const bool reverse = (blockIdx.x + blockIdx.y + blockIdx.z) % 2 == 1;
  while (live > 0) {
    b.progress = false;
    for (int k = 0; k < b.threads; ++k) {
      const int t = reverse ? b.threads - 1 - k : k;
      Fiber& f = b.fibers[static_cast<std::size_t>(t)];
      if (f.done) continue;
      threadIdx = f.index;
      b.current = t;
      void* fake = nullptr;
#if defined(__SANITIZE_ADDRESS__)
      __sanitizer_start_switch_fiber(&fake, f.stack.get(), kStackBytes);
#endif
      swapcontext(&b.scheduler, &f.context);
#if defined(__SANITIZE_ADDRESS__)
      __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
      (void)fake;
      if (f.done) --live;
    }
    if (!b.progress && live > 0) {
      throw Error(std::string("CUDA emulation: kernel ") + b.name + ", block (" +
                  std::to_string(blockIdx.x) + ", " + std::to_string(blockIdx.y) + ", " +
                  std::to_string(blockIdx.z) + "): " + std::to_string(live) +
                  " threads wait at a barrier that cannot complete (threads at different "
                  "barriers, or some returned before a __syncthreads others wait at)");
    }
  }
}

}  // namespace

void run_grid(const char* name, dim3 grid, dim3 block_dim, std::size_t shared_bytes,
              const std::function<void()>& body) {
  const long long threads = static_cast<long long>(block_dim.x) * block_dim.y * block_dim.z;
  if (threads <= 0 || threads > kMaxThreadsPerBlock || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
      grid.y > 65535 || grid.z > 65535) {
    last_error = cudaErrorInvalidConfiguration;
    return;
  }
  if (shared_bytes > static_cast<std::size_t>(kMaxSharedOptin)) {
    last_error = cudaErrorInvalidValue;
    return;
  }
  if (running != nullptr) throw Error("CUDA emulation: a launch inside a launch");
  Block b;
  b.name = name;
  b.body = &body;
  b.threads = static_cast<int>(threads);
  b.fibers.resize(static_cast<std::size_t>(threads));
  const int warps = (b.threads + warpSize - 1) / warpSize;
  b.warp_barriers.resize(static_cast<std::size_t>(warps));
  b.warp_sizes.resize(static_cast<std::size_t>(warps));
  for (int w = 0; w < warps; ++w) {
    b.warp_sizes[static_cast<std::size_t>(w)] = std::min(warpSize, b.threads - w * warpSize);
  }
  b.exchange_slots.resize(static_cast<std::size_t>(warps) * warpSize * 8);
  b.shared.resize(shared_bytes);
  blockDim = block_dim;
  gridDim = grid;
  running = &b;
  try {
    for (unsigned z = 0; z < grid.z; ++z) {
      for (unsigned y = 0; y < grid.y; ++y) {
        for (unsigned x = 0; x < grid.x; ++x) {
          blockIdx = uint3{x, y, z};
          run_block(b, block_dim);
        }
      }
    }
  } catch (...) {
    running = nullptr;
    throw;
  }
  running = nullptr;
}

void* dynamic_shared() { return block().shared.data(); }

void sync_block() { wait_at(block().block_barrier, block().threads); }

int lane() { return block().current % warpSize; }

void sync_warp(unsigned mask) {
  Block& b = block();
  const int warp = b.current / warpSize;
  const int size = b.warp_sizes[static_cast<std::size_t>(warp)];
  const unsigned full = size == warpSize ? 0xffffffffu : ((1u << size) - 1u);
  if (mask != full) {
    fail(std::string("kernel ") + b.name + ": only whole-warp masks are emulated (got " +
         std::to_string(mask) + ")");
  }
  wait_at(b.warp_barriers[static_cast<std::size_t>(warp)], size);
}

void exchange(unsigned mask, const void* value, void* out, std::size_t bytes, int src_lane) {
  Block& b = block();
  const int warp = b.current / warpSize;
  unsigned char* slots = b.exchange_slots.data() + static_cast<std::size_t>(warp) * warpSize * 8;
  std::memcpy(slots + static_cast<std::size_t>(lane()) * 8, value, bytes);
  sync_warp(mask);  // every lane has written its value
  std::memcpy(out, slots + static_cast<std::size_t>(src_lane) * 8, bytes);
  sync_warp(mask);  // every lane has read before any lane writes again
}

}  // namespace plait::cuda_emulation

// ---- The CUDA runtime functions the kernels, launchers and tests call. Device memory is host
// memory; streams are tokens (everything runs synchronously at launch).
namespace emu = plait::cuda_emulation;

extern "C" {

cudaError_t cudaGetLastError() {
  const cudaError_t e = emu::last_error;
  emu::last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return emu::last_error; }
const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    default: return "cudaError (emulated)";
  }
}
const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    default: return "error (emulated)";
  }
}
cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int) { return cudaSuccess; }
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int) {
  switch (attribute) {
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = emu::kMaxSharedOptin; break;
    case cudaDevAttrMultiProcessorCount: *value = emu::kMultiprocessors; break;
    case cudaDevAttrMaxThreadsPerBlock: *value = emu::kMaxThreadsPerBlock; break;
    default: return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}
cudaError_t cudaFuncSetAttribute(const void*, cudaFuncAttribute, int value) {
  return value <= emu::kMaxSharedOptin ? cudaSuccess : cudaErrorInvalidValue;
}
cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  *pointer = std::malloc(bytes > 0 ? bytes : 1);
  if (*pointer == nullptr) return cudaErrorMemoryAllocation;
  std::memset(*pointer, emu::kPoison, bytes);
  return cudaSuccess;
}
cudaError_t cudaFree(void* pointer) {
  std::free(pointer);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  if (bytes > 0) std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t) {
  return cudaMemcpy(dst, src, bytes, kind);
}
cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  if (bytes > 0) std::memset(dst, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t) {
  return cudaMemset(dst, value, bytes);
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  *stream = reinterpret_cast<cudaStream_t>(new char);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete reinterpret_cast<char*>(stream);
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
// Events: every launch and copy completes before its call returns, so an event is complete once
// recorded; the handles are distinct allocations only so that a double destroy is caught.
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  *event = reinterpret_cast<cudaEvent_t>(new char);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete reinterpret_cast<char*>(event);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaEventQuery(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }

}  // extern "C"
