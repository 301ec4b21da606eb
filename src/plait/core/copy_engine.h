#pragma once
// Asynchronous copies between memory tiers (device <-> host): the seam offload and ZeRO-3's
// parked parameter groups use, and that the GPU backend implements with a copy stream. Three
// operations, CUDA's shape: submit a copy (cudaMemcpyAsync on a copy stream), an event after it
// (cudaEventRecord), and waiting for or polling that event (cudaEventSynchronize /
// cudaEventQuery). Copies complete in submission order, so an event stands for every copy
// submitted before it. Callers wait only where they need the data; until then the source must
// not change and the destination must not be read.
#include <cstddef>
#include <cstdint>

namespace plait {

// Marks the point after a copy: complete once it, and every copy submitted before it, is done.
struct CopyEvent {
  std::uint64_t sequence = 0;  // 0: nothing to wait for
};

class CopyEngine {
 public:
  virtual ~CopyEngine() = default;
  // Queues a copy of `bytes` bytes from `src` to `dst` (non-overlapping) and returns its event.
  virtual CopyEvent submit(void* dst, const void* src, std::size_t bytes) = 0;
  // Whether the event's copies are done (never blocks).
  virtual bool ready(CopyEvent event) const = 0;
  // Returns once the event's copies are done.
  virtual void wait(CopyEvent event) = 0;
  // Waits for everything submitted so far.
  virtual void synchronize() = 0;
  // Bytes copied so far (for reports and tests).
  virtual std::size_t bytes_copied() const = 0;
};

}  // namespace plait
