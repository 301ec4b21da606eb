// A Buffer lives in the MemorySpace it is given (memory_space.h): it allocates whole 64-byte
// lines there, zero-fills them there, frees them there (also after a move), and turns the
// space's std::bad_alloc into a HostOutOfMemoryError naming what was asked for, tracker restored.
#include <gtest/gtest.h>

#include <new>

#include "plait/core/buffer.h"
#include "plait/core/host_memory.h"

namespace plait {
namespace {

class CountingMemory : public HostMemory {
 public:
  void* allocate(std::size_t bytes) override {
    if (refuse) throw std::bad_alloc();
    allocated += bytes;
    return HostMemory::allocate(bytes);
  }
  void deallocate(void* block, std::size_t bytes) override {
    freed += bytes;
    HostMemory::deallocate(block, bytes);
  }
  void zero(void* dst, std::size_t bytes) override {
    zeroed += bytes;
    HostMemory::zero(dst, bytes);
  }
  bool refuse = false;
  std::size_t allocated = 0, freed = 0, zeroed = 0;
};

TEST(BufferMemorySpace, AllocatesZeroesAndFreesInItsSpace) {
  CountingMemory memory;
  MemoryTracker t;
  {
    FloatBuffer b(t, MemoryCategory::kOptimizerState, 20, memory);  // 80 bytes: two lines
    EXPECT_EQ(memory.allocated, 128u);
    EXPECT_EQ(memory.zeroed, 128u);
    EXPECT_EQ(t.current(MemoryCategory::kOptimizerState), 80u);  // the tracker sees the size
    for (std::size_t i = 0; i < b.size(); ++i) EXPECT_EQ(b[i], 0.0f);
    b[3] = 2.0f;
    b.zero();
    EXPECT_EQ(b[3], 0.0f);
    EXPECT_EQ(memory.zeroed, 128u + 80u);
    FloatBuffer moved = std::move(b);
    EXPECT_EQ(memory.freed, 0u);
  }
  EXPECT_EQ(memory.freed, 128u);
  EXPECT_EQ(t.current(MemoryCategory::kOptimizerState), 0u);
}

TEST(BufferMemorySpace, ASpaceWithoutMemoryIsAnOutOfMemoryError) {
  CountingMemory memory;
  memory.refuse = true;
  MemoryTracker t;
  EXPECT_THROW(FloatBuffer(t, MemoryCategory::kParameters, 1000, memory), HostOutOfMemoryError);
  EXPECT_EQ(t.current(MemoryCategory::kParameters), 0u);
}

TEST(BufferMemorySpace, TheHostIsTheDefault) {
  MemoryTracker t;
  FloatBuffer b(t, MemoryCategory::kParameters, (std::size_t{3} << 20) / sizeof(float));
  // From 2 MiB on huge-page boundaries (host_memory.h).
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % (std::size_t{2} << 20), 0u);
}

}  // namespace
}  // namespace plait
