#include "plait/kernels/embedding.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "plait/core/error.h"
#include "plait/kernels/parallel.h"

namespace plait::kernels {

template <typename T>
void embedding_forward(T* out, const std::int32_t* tokens, const T* wte, const T* wpe, int batch,
                       int s, int c, int pos0, int vocab) {
  const int n = batch * s;
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      throw Error("embedding: token " + std::to_string(tokens[i]) + " at (row " +
                  std::to_string(i / s) + ", position " + std::to_string(pos0 + i % s) +
                  ") is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * c))
  for (int i = 0; i < n; ++i) {
    const T* te = wte + static_cast<std::size_t>(tokens[i]) * c;
    T* o = out + static_cast<std::size_t>(i) * c;
    if (wpe) {
      // Added in Acc<T> (fp32 for bf16), rounded once.
      const T* pe = wpe + static_cast<std::size_t>(pos0 + i % s) * c;
      for (int j = 0; j < c; ++j) o[j] = from_float<T>(to_float(te[j]) + to_float(pe[j]));
    } else {
      std::copy(te, te + c, o);  // a copy: exact in every type
    }
  }
}

template <typename T>
void embedding_backward(Acc<T>* dwte, Acc<T>* dwpe, const T* dout, const std::int32_t* tokens, int batch,
                        int s, int c, int pos0) {
  // The whole table is the one shard of all rows.
  embedding_backward_shard<T>(dwte, dwpe, dout, tokens, batch, s, c, pos0, 0, std::numeric_limits<int>::max());
}

template <typename T>
void embedding_forward_shard(float* out, const std::int32_t* tokens, const T* wte_rows, const T* wpe, int batch,
                             int s, int c, int pos0, int vocab, int vocab_begin, int rows) {
  const int n = batch * s;
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      throw Error("embedding: token " + std::to_string(tokens[i]) + " at (row " + std::to_string(i / s) +
                  ", position " + std::to_string(pos0 + i % s) + ") is outside the vocabulary [0, " +
                  std::to_string(vocab) + ")");
    }
  }
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * c))
  for (int i = 0; i < n; ++i) {
    float* o = out + static_cast<std::size_t>(i) * c;
    const int local = tokens[i] - vocab_begin;
    const bool mine = local >= 0 && local < rows;
    const T* te = mine ? wte_rows + static_cast<std::size_t>(local) * c : nullptr;
    const T* pe = wpe ? wpe + static_cast<std::size_t>(pos0 + i % s) * c : nullptr;
    for (int j = 0; j < c; ++j) {
      const float a = te ? static_cast<float>(to_float(te[j])) : 0.0f;
      o[j] = pe ? a + static_cast<float>(to_float(pe[j])) : a;
    }
  }
}

template <typename T>
void embedding_backward_shard(Acc<T>* dwte_rows, Acc<T>* dwpe, const T* dout, const std::int32_t* tokens, int batch,
                              int s, int c, int pos0, int vocab_begin, int rows) {
  // Tokens repeat, so rows of dwte collide; each thread owns a range of columns instead and
  // walks the positions in order (no races, deterministic).
  constexpr int kColumnBlock = 64;
  const int blocks = (c + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{batch} * s * c))
  for (int blk = 0; blk < blocks; ++blk) {
    const int j0 = blk * kColumnBlock;
    const int j1 = std::min(c, j0 + kColumnBlock);
    for (int b = 0; b < batch; ++b) {
      for (int t = 0; t < s; ++t) {
        const std::size_t row = static_cast<std::size_t>(b) * s + t;
        const T* g = dout + row * c;
        const int local = tokens[row] - vocab_begin;
        if (local >= 0 && local < rows) {
          Acc<T>* te = dwte_rows + static_cast<std::size_t>(local) * c;
          for (int j = j0; j < j1; ++j) te[j] += to_float(g[j]);
        }
        if (dwpe) {
          Acc<T>* pe = dwpe + static_cast<std::size_t>(pos0 + t) * c;
          for (int j = j0; j < j1; ++j) pe[j] += to_float(g[j]);
        }
      }
    }
  }
}

template void embedding_forward_shard<float>(float*, const std::int32_t*, const float*, const float*, int, int, int,
                                             int, int, int, int);
template void embedding_forward_shard<bf16>(float*, const std::int32_t*, const bf16*, const bf16*, int, int, int, int,
                                            int, int, int);
template void embedding_backward_shard<float>(float*, float*, const float*, const std::int32_t*, int, int, int, int,
                                              int, int);
template void embedding_backward_shard<bf16>(float*, float*, const bf16*, const std::int32_t*, int, int, int, int,
                                             int, int);

template void embedding_forward<float>(float*, const std::int32_t*, const float*, const float*, int,
                                       int, int, int, int);
template void embedding_forward<double>(double*, const std::int32_t*, const double*,
                                        const double*, int, int, int, int, int);
template void embedding_backward<float>(float*, float*, const float*, const std::int32_t*, int, int,
                                        int, int);
template void embedding_backward<double>(double*, double*, const double*, const std::int32_t*, int,
                                         int, int, int);
template void embedding_forward<bf16>(bf16*, const std::int32_t*, const bf16*, const bf16*, int,
                                      int, int, int, int);
template void embedding_backward<bf16>(float*, float*, const bf16*, const std::int32_t*, int, int,
                                       int, int);

}  // namespace plait::kernels
