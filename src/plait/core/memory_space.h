#pragma once
// Where bytes live: the host's memory or a device's. core's Buffer allocates through one, and
// kernels::Backend (kernels/backend.h) is one, so a buffer can hold a device's memory without
// core knowing the device. Blocks are raw: whoever asks charges its MemoryTracker category first
// (Buffer and model::TensorPool do), so the accounting stays the engine's whatever the space.
// Copies say which way they go (CUDA's cudaMemcpyKind): a device needs it, the host does not.
#include <cstddef>

namespace plait {

enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice };

class MemorySpace {
 public:
  virtual ~MemorySpace() = default;
  // A block of at least 64-byte alignment, contents undefined; throws std::bad_alloc when the
  // space has no memory left. deallocate takes the bytes allocate was asked for.
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* block, std::size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, std::size_t bytes, CopyKind kind) = 0;
  virtual void zero(void* dst, std::size_t bytes) = 0;
};

// The host's memory (host_memory.h): the default of every Buffer.
MemorySpace& host_memory();

}  // namespace plait
