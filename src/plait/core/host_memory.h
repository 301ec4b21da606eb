#pragma once
// The host's memory: 64-byte-aligned blocks, and blocks from 2 MiB on 2 MiB boundaries with
// transparent huge pages asked for (a training step's large buffers then fault in 2 MiB at a
// time); memcpy and memset on the calling thread (the CPU backend zeroes large blocks in
// parallel with OpenMP, which core does not link).
#include "plait/core/memory_space.h"

namespace plait {

class HostMemory : public MemorySpace {
 public:
  void* allocate(std::size_t bytes) override;
  void deallocate(void* block, std::size_t bytes) override;
  void copy(void* dst, const void* src, std::size_t bytes, CopyKind kind) override;
  void zero(void* dst, std::size_t bytes) override;
};

}  // namespace plait
