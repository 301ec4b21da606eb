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
  if (resident_ > 0 && tracker_ != nullptr) tracker_->release(category_, resident_);
  if (data_ != nullptr) munmap(data_, mapped_);
}

// Pages [begin, end) of the mapping back to the system and inaccessible.
void ReservedBytes::unmap_pages(std::size_t begin, std::size_t end) {
  if (end <= begin) return;
  char* base = static_cast<char*>(data_) + begin;
  madvise(base, end - begin, MADV_DONTNEED);  // the pages go back to the system now
  mprotect(base, end - begin, PROT_NONE);
}

void ReservedBytes::commit() {
  if (tracker_ == nullptr || resident_ == bytes_) return;
  tracker_->allocate(category_, bytes_ - resident_);
  // Anonymous pages read as zero after MADV_DONTNEED (and before first touch); retained pages
  // keep their contents.
  if (mapped_ > 0 && mprotect(data_, mapped_, PROT_READ | PROT_WRITE) != 0) {
    tracker_->release(category_, bytes_ - resident_);
    throw Error(std::string("committing reserved memory: mprotect failed: ") + std::strerror(errno));
  }
  resident_ = bytes_;
}

void ReservedBytes::decommit() {
  if (resident_ == 0) return;
  unmap_pages(0, mapped_);
  tracker_->release(category_, resident_);
  resident_ = 0;
}

void ReservedBytes::retain(std::size_t offset, std::size_t length) {
  if (resident_ != bytes_ || offset + length > bytes_) {
    throw Error("ReservedBytes::retain: [" + std::to_string(offset) + ", " + std::to_string(offset + length) +
                ") of a buffer of " + std::to_string(bytes_) + " bytes that is " +
                (resident_ != bytes_ ? "not fully committed" : "too small"));
  }
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t keep_begin = length == 0 ? mapped_ : offset / page * page;
  const std::size_t keep_end = length == 0 ? mapped_ : page_rounded(offset + length);
  unmap_pages(0, keep_begin);
  unmap_pages(keep_end, mapped_);
  tracker_->release(category_, bytes_ - length);
  resident_ = length;
}

}  // namespace plait
