#include "plait/core/host_memory.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

namespace plait {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

}  // namespace

MemorySpace& host_memory() {
  static HostMemory memory;
  return memory;
}

void* HostMemory::allocate(std::size_t bytes) {
  const std::size_t alignment = bytes >= kHugePage ? kHugePage : 64;
  if (bytes > SIZE_MAX - alignment) throw std::bad_alloc();
  void* p = std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
  if (p == nullptr) throw std::bad_alloc();
  if (bytes >= kHugePage) madvise(p, bytes, MADV_HUGEPAGE);  // advisory; failure is harmless
  return p;
}

void HostMemory::deallocate(void* block, std::size_t) { std::free(block); }

void HostMemory::copy(void* dst, const void* src, std::size_t bytes, CopyKind) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

void HostMemory::zero(void* dst, std::size_t bytes) {
  if (bytes > 0) std::memset(dst, 0, bytes);
}

}  // namespace plait
