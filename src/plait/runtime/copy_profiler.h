#pragma once
// The core time a CPU rank's copy engine spends per byte (core/thread_copy_engine.h: a memcpy on
// a worker thread that shares the rank's cores with its compute), for the simulator's CPU-only
// offload term (sim::ActivationOffloadModel::compute_seconds_per_byte). Measured as the offload
// moves its bytes: blocks of `block_bytes` copied one after another over a span of `span_bytes`
// (a step's copies), each pass reading and writing memory untouched since the previous pass, as a
// unit copied out long after its F wrote it, or back long after it went, does. The figure is the
// thread CPU time (not wall time: load that takes the core away does not count) per byte, the
// median of `passes` passes after one that faults the pages in.
#include <cstddef>

namespace plait::runtime {

double measure_copy_seconds_per_byte(std::size_t block_bytes, std::size_t span_bytes, int passes = 5);

}  // namespace plait::runtime
