#pragma once
// Whole-buffer operations the engine needs besides the layers' kernels: zeroing (gradients, dK/dV
// accumulators), filling with a constant (norm gains), adding one buffer into another (the tied
// embedding's gradient copies).
#include <cstddef>

namespace plait::kernels {

// bytes of dst set to 0; large buffers in parallel chunks, so the pages are touched by several
// threads at once (a GPT-2 small gradient buffer is ~500 MB).
void zero_bytes(void* dst, std::size_t bytes);
// dst (n) = value.
void fill(float* dst, std::size_t n, float value);
// dst (n) += src (n).
void accumulate(float* dst, const float* src, std::size_t n);

}  // namespace plait::kernels
