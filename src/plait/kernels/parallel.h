#pragma once
// When a loop is worth an OpenMP parallel region: opening one costs microseconds (much more when
// the cores are shared and a worker is descheduled), so loops over fewer elements than this run
// on the calling thread. Used as `#pragma omp parallel for if (parallel_worthwhile(work))`.
#include <cstdint>

namespace plait::kernels {

inline constexpr std::int64_t kParallelMinElements = 1 << 15;

constexpr bool parallel_worthwhile(std::int64_t elements) {
  return elements >= kParallelMinElements;
}

}  // namespace plait::kernels
