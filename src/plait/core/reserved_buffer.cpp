#include "plait/core/reserved_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "plait/core/error.h"

namespace plait {
namespace {

std::size_t page_rounded(std::size_t bytes) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

}  // namespace

ReservedBytes::ReservedBytes(MemoryTracker& tracker, MemoryCategory category, std::size_t bytes,
                             bool committed)
    : tracker_(&tracker), category_(category), bytes_(bytes), mapped_(page_rounded(bytes)) {
  if (mapped_ > 0) {
    // Address space only: no access, no swap reservation, nothing resident until committed.
    data_ = mmap(nullptr, mapped_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (data_ == MAP_FAILED) {
      data_ = nullptr;
      throw HostOutOfMemoryError(category, bytes, tracker.current_total());
    }
  }
  if (committed) commit();
}

ReservedBytes::~ReservedBytes() {
  if (committed_ && tracker_ != nullptr) tracker_->release(category_, bytes_);
  if (data_ != nullptr) munmap(data_, mapped_);
}

void ReservedBytes::commit() {
  if (committed_ || tracker_ == nullptr) return;
  tracker_->allocate(category_, bytes_);
  // Anonymous pages read as zero after MADV_DONTNEED (and before first touch).
  if (mapped_ > 0 && mprotect(data_, mapped_, PROT_READ | PROT_WRITE) != 0) {
    tracker_->release(category_, bytes_);
    throw Error(std::string("committing reserved memory: mprotect failed: ") + std::strerror(errno));
  }
  committed_ = true;
}

void ReservedBytes::decommit() {
  if (!committed_) return;
  if (mapped_ > 0) {
    madvise(data_, mapped_, MADV_DONTNEED);  // the pages go back to the system now
    mprotect(data_, mapped_, PROT_NONE);
  }
  tracker_->release(category_, bytes_);
  committed_ = false;
}

}  // namespace plait
