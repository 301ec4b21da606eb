#pragma once
// sums (cols) += the column sums of rows (n, cols), in Acc<T>: a bias gradient. Each thread owns
// a fixed range of columns and walks the rows in order, so the result does not depend on the
// thread count or scheduling (deterministic). Used by matmul.cpp and bf16_matmul.cpp.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "plait/kernels/accumulator.h"
#include "plait/kernels/parallel.h"

namespace plait::kernels {

template <typename T>
void add_column_sums(Acc<T>* sums, const T* rows, int n, int cols) {
  constexpr int kColumnBlock = 256;
  const int blocks = (cols + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * cols))
  for (int blk = 0; blk < blocks; ++blk) {
    const int o0 = blk * kColumnBlock;
    const int o1 = std::min(cols, o0 + kColumnBlock);
    Acc<T> acc[kColumnBlock] = {};
    for (int i = 0; i < n; ++i) {
      const T* row = rows + static_cast<std::size_t>(i) * cols;
      for (int o = o0; o < o1; ++o) acc[o - o0] += static_cast<Acc<T>>(row[o]);
    }
    for (int o = o0; o < o1; ++o) sums[o] += acc[o - o0];
  }
}

}  // namespace plait::kernels
