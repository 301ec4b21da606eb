#include "plait/kernels/cuda/attention.h"

#include <cstddef>
#include <string>

#include "plait/kernels/cuda/device.cuh"

// FlashAttention-2 (Dao 2023, arXiv 2307.08691) forward (Algorithm 1) and backward (Algorithm 2,
// with dq computed by its own kernel instead of atomics, so that results are deterministic):
//
//   forward_kernel   one block per (query tile of kBR rows, query head, batch row): for each key
//                    tile it sees, S = Q K^T / sqrt(d) with the causal (and document) mask, the online softmax update of
//                    the row maximum m and sum l, O = diag(e^(m_old - m)) O + P V; at the end
//                    O / l and lse = m + log l.
//   row_dot_kernel   D = rowsum(dO * O) per (row, head).
//   dq_kernel        one block per query tile and head: for each visible key tile, P = e^(S - lse),
//                    dS = P * (dO V^T - D), dQ += dS K.
//   dkv_kernel       one block per (key tile, K/V head, batch row): for the group's query heads
//                    and the query tiles that see the tile, dV += P^T dO, dK += dS^T Q.
//
// Every product is fp32 on the CUDA cores (FFMA), the tiles held in shared memory as fp32
// whatever the storage type: the simplest form that is right, and the reference a tensor-core
// (mma / wgmma) version will be checked against. The block's 128 threads form an 8 x 16 grid
// (ty, tx); thread (ty, tx) owns rows ty*RM + i of a tile and columns tx + 16*jj, so a warp reads
// 16 consecutive columns of one row (no bank conflicts, rows padded by one word) and one or two
// rows of the other operand (broadcast).
namespace plait::kernels::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kTy = 8;
constexpr int kTx = 16;
static_assert(kTy * kTx == kThreads);

// Tiles: kBR query rows by kBC keys; smaller key tiles at d <= 128 keep the accumulators in
// registers and the shared memory within an A100's 163 KiB.
template <int D>
struct Tiles {
  static constexpr int kBR = 64;
  static constexpr int kBC = D <= 64 ? 64 : 32;
  static constexpr int kStride = D + 1;     // row stride of a (rows, D) tile
  static constexpr int kPStride = kBC + 1;  // row stride of a (kBR, kBC) tile
};

// Everything the kernels need about one call, passed by value (kernel parameter space) as a
// __grid_constant__ so that indexing it does not copy it to local memory.
template <typename T>
struct Shape {
  const T* kv[kMaxKVBlocks];
  float* dkv[kMaxKVBlocks];
  int start[kMaxKVBlocks + 1];  // block i holds positions [start[i], start[i+1])
  int blocks;
  int batch, s, e, q_start, c, heads, kv_heads, d, group, ckv;
  float scale;  // 1 / sqrt(d)
  const std::int32_t* doc;  // the document mask (attention.h), null: causal only
  int doc_stride;
};

// Where the document of position p (< e) of batch row b begins: the first key p sees.
template <typename T>
__device__ int first_key(const Shape<T>& g, int b, int p) {
  return g.doc ? g.doc[static_cast<std::size_t>(b) * g.doc_stride + p] : 0;
}

// The first key tile some query of positions [p0, p0 + rows) sees, on the tiles' grid of bc keys:
// the keys they see are [first_key(p0), p0 + rows) (their documents are consecutive intervals).
template <typename T>
__device__ int first_key_tile(const Shape<T>& g, int b, int p0, int bc) {
  return first_key(g, b, p0) / bc * bc;
}

// Offset of key position kp's row, K/V head j, in batch row b of its block; *block_index is set.
template <typename T>
__device__ std::size_t kv_offset(const Shape<T>& g, int b, int kp, int j, int* block_index) {
  int i = 0;
  while (g.start[i + 1] <= kp) ++i;  // blocks are few; empty blocks are skipped
  *block_index = i;
  const int len = g.start[i + 1] - g.start[i];
  return (static_cast<std::size_t>(b) * len + (kp - g.start[i])) * 2 * g.ckv +
         static_cast<std::size_t>(j) * g.d;
}

// dst (ROWS, D) fp32 with row stride D + 1 from rows src(r) of storage type T: columns past d and
// rows whose pointer is null are zero.
template <int ROWS, int D, typename T, typename Src>
__device__ void load_tile(float* dst, Src src, int d) {
  for (int idx = threadIdx.x; idx < ROWS * D; idx += kThreads) {
    const int r = idx / D, x = idx % D;
    const T* row = src(r);
    dst[r * (D + 1) + x] = (row != nullptr && x < d) ? to_float(row[x]) : 0.0f;
  }
}

// The one product of the kernels, on tiles in shared memory: for the thread's RM rows
// row0 + i and N columns tx + 16 n,
//   acc[i][n] += sum_{k < inner} a[(row0 + i) a_row + k a_k] * b[(tx + 16 n) b_col + k b_k].
// The strides pick the operand's orientation: S = Q K^T reads both tiles along rows
// (a_k = b_k = 1); O += P V reads P along a row and V down a column (b_col = 1, b_k = D + 1);
// dV += P^T dO reads P down a column (a_row = 1, a_k = its row stride).
template <int RM, int N>
__device__ void tile_product(const float* a, int a_row, int a_k, const float* b, int b_col, int b_k,
                             int inner, int row0, int tx, float (&acc)[RM][N]) {
  for (int k = 0; k < inner; ++k) {
    float av[RM], bv[N];
#pragma unroll
    for (int i = 0; i < RM; ++i) av[i] = a[(row0 + i) * a_row + k * a_k];
#pragma unroll
    for (int n = 0; n < N; ++n) bv[n] = b[(tx + kTx * n) * b_col + k * b_k];
#pragma unroll
    for (int i = 0; i < RM; ++i) {
#pragma unroll
      for (int n = 0; n < N; ++n) acc[i][n] += av[i] * bv[n];
    }
  }
}

template <int RM, int N>
__device__ void zero(float (&acc)[RM][N]) {
#pragma unroll
  for (int i = 0; i < RM; ++i) {
#pragma unroll
    for (int n = 0; n < N; ++n) acc[i][n] = 0.0f;
  }
}

// acc = a b^T over x < d for (rows of a) x (rows of b), both tiles of row stride D + 1.
template <int RM, int CN, int D>
__device__ void dot_rows(const float* a, const float* b, int d, int ty, int tx,
                         float (&acc)[RM][CN]) {
  zero(acc);
  tile_product<RM, CN>(a, D + 1, 1, b, D + 1, 1, d, ty * RM, tx, acc);
}

// acc += p v over k < inner: (rows of p, stride p_stride) x (D columns of v, stride D + 1).
template <int RM, int DN, int D>
__device__ void accumulate_pv(const float* p, int p_stride, const float* v, int inner, int ty,
                              int tx, float (&acc)[RM][DN]) {
  tile_product<RM, DN>(p, p_stride, 1, v, 1, D + 1, inner, ty * RM, tx, acc);
}

// acc += p^T x over r < rows: (columns of p) x (D columns of x), for dV = P^T dO, dK = dS^T Q.
template <int KM, int DN, int D>
__device__ void accumulate_ptx(const float* p, int p_stride, const float* x, int rows, int ty,
                               int tx, float (&acc)[KM][DN]) {
  tile_product<KM, DN>(p, 1, p_stride, x, 1, D + 1, rows, ty * KM, tx, acc);
}

// Row pointers of the key tile starting at k0 (null past `end`): K/V head j's K, or its dK.
template <typename T, int BC>
__device__ void key_rows(const Shape<T>& g, int b, int j, int k0, int end, const T** k_rows,
                         float** dk_rows) {
  for (int t = threadIdx.x; t < BC; t += kThreads) {
    const int kp = k0 + t;
    if (kp < end) {
      int i = 0;
      const std::size_t off = kv_offset(g, b, kp, j, &i);
      k_rows[t] = g.kv[i] + off;
      if (dk_rows) dk_rows[t] = g.dkv[i] + off;
    } else {
      k_rows[t] = nullptr;
      if (dk_rows) dk_rows[t] = nullptr;
    }
  }
}

// Loads the key tile starting at k0 (keys below `end`) of K/V head j, batch row b: its row
// pointers (and, with dk_rows, those of its gradient), then K into ks and V into vs. Ends with
// a barrier: the tiles are ready to read.
template <int BC, int D, typename T>
__device__ void load_key_tile(const Shape<T>& g, int b, int j, int k0, int end, const T** k_rows,
                              float** dk_rows, float* ks, float* vs) {
  key_rows<T, BC>(g, b, j, k0, end, k_rows, dk_rows);
  __syncthreads();
  load_tile<BC, D, T>(ks, [&](int t) { return k_rows[t]; }, g.d);
  load_tile<BC, D, T>(
      vs, [&](int t) -> const T* { return k_rows[t] ? k_rows[t] + g.ckv : nullptr; }, g.d);
  __syncthreads();
}

template <int D>
constexpr std::size_t forward_shared_bytes() {
  using Tl = Tiles<D>;
  return sizeof(float) *
         ((Tl::kBR + 2 * Tl::kBC) * Tl::kStride + Tl::kBR * Tl::kPStride + 3 * Tl::kBR);
}

template <int D, typename T>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(T* out, float* lse, const T* q, const __grid_constant__ Shape<T> g) {
  using Tl = Tiles<D>;
  constexpr int BR = Tl::kBR, BC = Tl::kBC, RM = BR / kTy, CN = BC / kTx, DN = D / kTx;
  PLAIT_DYNAMIC_SHARED(float, smem);
  float* qs = smem;
  float* ks = qs + BR * Tl::kStride;
  float* vs = ks + BC * Tl::kStride;
  float* ps = vs + BC * Tl::kStride;
  float* row_m = ps + BR * Tl::kPStride;
  float* row_l = row_m + BR;
  float* row_alpha = row_l + BR;
  __shared__ const T* k_rows[BC];

  const int r0 = blockIdx.x * BR, h = blockIdx.y, b = blockIdx.z;
  const int j = h / g.group;  // the K/V head of h's group (repeat_kv)
  const int rows = g.s - r0 < BR ? g.s - r0 : BR;
  const int kmax = g.q_start + r0 + rows;  // keys the tile's last query sees
  const int ty = threadIdx.x / kTx, tx = threadIdx.x % kTx;

  load_tile<BR, D, T>(
      qs,
      [&](int r) -> const T* {
        return r < rows ? q + (static_cast<std::size_t>(b) * g.s + r0 + r) * g.c +
                              static_cast<std::size_t>(h) * g.d
                        : nullptr;
      },
      g.d);
  for (int r = threadIdx.x; r < BR; r += kThreads) {
    row_m[r] = -INFINITY;
    row_l[r] = 0.0f;
  }
  float o[RM][DN];
  zero(o);

  for (int k0 = first_key_tile(g, b, g.q_start + r0, BC); k0 < kmax; k0 += BC) {
    __syncthreads();  // the previous tile's readers of ks, vs, ps are done
    load_key_tile<BC, D, T>(g, b, j, k0, kmax, k_rows, nullptr, ks, vs);
    float sc[RM][CN];
    dot_rows<RM, CN, D>(qs, ks, g.d, ty, tx, sc);
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const int r = ty * RM + i;
      const int p = g.q_start + r0 + r;  // the query's absolute position
      const int lo = r < rows ? first_key(g, b, p) : 0;  // (rows past the segment: unused)
#pragma unroll
      for (int jj = 0; jj < CN; ++jj) {
        const int kk = tx + kTx * jj, kp = k0 + kk;
        ps[r * Tl::kPStride + kk] = (kp <= p && kp < kmax && kp >= lo) ? sc[i][jj] * g.scale : -INFINITY;
      }
    }
    __syncthreads();
    // Online softmax, one thread per row. Causal alone, key 0 is in the first tile and visible
    // to every row, so m is finite from the first tile on and a fully masked later tile leaves
    // alpha = 1. Under a document mask a row may see no key of its tile's first key tiles (an
    // earlier document's): its m stays -inf (shifted by 0, its P is 0) until it does.
    for (int r = threadIdx.x; r < BR; r += kThreads) {
      float* row = ps + r * Tl::kPStride;
      float mx = row_m[r];
      for (int kk = 0; kk < BC; ++kk) mx = fmaxf(mx, row[kk]);
      const float shift = mx == -INFINITY ? 0.0f : mx;
      const float alpha = expf(row_m[r] - shift);
      float sum = 0.0f;
      for (int kk = 0; kk < BC; ++kk) {
        const float pv = expf(row[kk] - shift);
        row[kk] = pv;
        sum += pv;
      }
      row_l[r] = row_l[r] * alpha + sum;
      row_m[r] = mx;
      row_alpha[r] = alpha;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const float alpha = row_alpha[ty * RM + i];
#pragma unroll
      for (int dd = 0; dd < DN; ++dd) o[i][dd] *= alpha;
    }
    accumulate_pv<RM, DN, D>(ps, Tl::kPStride, vs, BC, ty, tx, o);
  }

#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int r = ty * RM + i;
    if (r >= rows) continue;
    const float inv_l = 1.0f / row_l[r];
    T* dst = out + (static_cast<std::size_t>(b) * g.s + r0 + r) * g.c +
             static_cast<std::size_t>(h) * g.d;
#pragma unroll
    for (int dd = 0; dd < DN; ++dd) {
      const int x = tx + kTx * dd;
      if (x < g.d) dst[x] = from_float<T>(o[i][dd] * inv_l);
    }
  }
  for (int r = threadIdx.x; r < rows; r += kThreads) {
    lse[(static_cast<std::size_t>(b) * g.heads + h) * g.s + r0 + r] = row_m[r] + logf(row_l[r]);
  }
}

// D[b, h, r] = sum_x dout[b, r, h*d + x] * out[b, r, h*d + x], one warp per (b, r, h).
constexpr int kRowDotWarps = 4;
template <typename T>
__global__ void row_dot_kernel(float* d_out, const T* dout, const T* out, int batch, int s, int c,
                               int heads, int d) {
  const long long item = static_cast<long long>(blockIdx.x) * kRowDotWarps + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (item >= static_cast<long long>(batch) * s * heads) return;
  const int h = static_cast<int>(item % heads);
  const long long row = item / heads;  // b * s + r
  const std::size_t off = static_cast<std::size_t>(row) * c + static_cast<std::size_t>(h) * d;
  float acc = 0.0f;
  for (int x = lane; x < d; x += kWarp) acc += to_float(dout[off + x]) * to_float(out[off + x]);
  acc = warp_sum(acc);
  const long long b = row / s, r = row % s;
  if (lane == 0) d_out[(b * heads + h) * s + r] = acc;
}

// The probabilities and score gradients of one (kBR, kBC) tile, in the S micro-tile layout:
// p = e^(S - lse) where the key is visible (row_first[r] <= kp <= query position, kp < key_end,
// row < rows), else 0; ds = p * (dP - D). row_first: the first key each row sees (its
// document's start; 0 causal).
template <int RM, int CN, int D>
__device__ void tile_probabilities(const float* qs, const float* dos, const float* ks,
                                   const float* vs, const float* row_lse, const float* row_d,
                                   const int* row_first, int d, float scale, int q_pos0, int rows,
                                   int k0, int key_end, int ty, int tx, float (&p)[RM][CN],
                                   float (&ds)[RM][CN]) {
  float dp[RM][CN];
  dot_rows<RM, CN, D>(qs, ks, d, ty, tx, p);
  dot_rows<RM, CN, D>(dos, vs, d, ty, tx, dp);
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int r = ty * RM + i;
    const int pos = q_pos0 + r;
#pragma unroll
    for (int jj = 0; jj < CN; ++jj) {
      const int kp = k0 + tx + kTx * jj;
      const bool visible = r < rows && kp <= pos && kp < key_end && kp >= row_first[r];
      const float pr = visible ? expf(p[i][jj] * scale - row_lse[r]) : 0.0f;
      p[i][jj] = pr;
      ds[i][jj] = pr * (dp[i][jj] - row_d[r]);
    }
  }
}

// The backward kernels' shared memory, one layout for both (dq_kernel leaves ps unused): the
// query side Q, dO (kBR rows) and its rows' lse, D and first visible key, the key side K, V
// (kBC rows), and the (kBR, kBC) tiles of P and dS.
template <int D>
struct BackwardTiles {
  using Tl = Tiles<D>;
  float *qs, *dos, *ks, *vs, *ps, *dss, *row_lse, *row_d;
  int* row_first;
  __device__ explicit BackwardTiles(float* smem) {
    qs = smem;
    dos = qs + Tl::kBR * Tl::kStride;
    ks = dos + Tl::kBR * Tl::kStride;
    vs = ks + Tl::kBC * Tl::kStride;
    ps = vs + Tl::kBC * Tl::kStride;
    dss = ps + Tl::kBR * Tl::kPStride;
    row_lse = dss + Tl::kBR * Tl::kPStride;
    row_d = row_lse + Tl::kBR;
    row_first = reinterpret_cast<int*>(row_d + Tl::kBR);
  }
  static constexpr std::size_t bytes() {
    return sizeof(float) *
           (2 * (Tl::kBR + Tl::kBC) * Tl::kStride + 2 * Tl::kBR * Tl::kPStride + 3 * Tl::kBR);
  }
};

// Loads the query-side tiles of rows r0.. of head h: Q, dO, and the rows' lse, D and first
// visible key (zero past `rows`).
template <int D, int BR, typename T>
__device__ void load_query_side(float* qs, float* dos, float* row_lse, float* row_d,
                                int* row_first, const T* q, const T* dout, const float* lse,
                                const float* dvec, const Shape<T>& g, int b, int h, int r0,
                                int rows) {
  auto at = [&](const T* base, int r) -> const T* {
    return r < rows ? base + (static_cast<std::size_t>(b) * g.s + r0 + r) * g.c +
                          static_cast<std::size_t>(h) * g.d
                    : nullptr;
  };
  load_tile<BR, D, T>(
      qs, [&](int r) { return at(q, r); }, g.d);
  load_tile<BR, D, T>(
      dos, [&](int r) { return at(dout, r); }, g.d);
  for (int r = threadIdx.x; r < BR; r += kThreads) {
    const std::size_t i = (static_cast<std::size_t>(b) * g.heads + h) * g.s + r0 + r;
    row_lse[r] = r < rows ? lse[i] : 0.0f;
    row_d[r] = r < rows ? dvec[i] : 0.0f;
    row_first[r] = r < rows ? first_key(g, b, g.q_start + r0 + r) : 0;
  }
}

template <int D, typename T>
__global__ void __launch_bounds__(kThreads)
    dq_kernel(T* dq, const T* dout, const T* q, const float* lse, const float* dvec,
              const __grid_constant__ Shape<T> g) {
  using Tl = Tiles<D>;
  constexpr int BR = Tl::kBR, BC = Tl::kBC, RM = BR / kTy, CN = BC / kTx, DN = D / kTx;
  PLAIT_DYNAMIC_SHARED(float, smem);
  const BackwardTiles<D> t(smem);
  float *qs = t.qs, *dos = t.dos, *ks = t.ks, *vs = t.vs, *dss = t.dss;
  float *row_lse = t.row_lse, *row_d = t.row_d;
  int* row_first = t.row_first;
  __shared__ const T* k_rows[BC];

  const int r0 = blockIdx.x * BR, h = blockIdx.y, b = blockIdx.z;
  const int j = h / g.group;
  const int rows = g.s - r0 < BR ? g.s - r0 : BR;
  const int kmax = g.q_start + r0 + rows;
  const int ty = threadIdx.x / kTx, tx = threadIdx.x % kTx;
  load_query_side<D, BR, T>(qs, dos, row_lse, row_d, row_first, q, dout, lse, dvec, g, b, h, r0,
                            rows);

  float acc[RM][DN];
  zero(acc);
  for (int k0 = first_key_tile(g, b, g.q_start + r0, BC); k0 < kmax; k0 += BC) {
    __syncthreads();
    load_key_tile<BC, D, T>(g, b, j, k0, kmax, k_rows, nullptr, ks, vs);
    float p[RM][CN], ds[RM][CN];
    tile_probabilities<RM, CN, D>(qs, dos, ks, vs, row_lse, row_d, row_first, g.d, g.scale,
                                  g.q_start + r0, rows, k0, kmax, ty, tx, p, ds);
#pragma unroll
    for (int i = 0; i < RM; ++i) {
#pragma unroll
      for (int jj = 0; jj < CN; ++jj) dss[(ty * RM + i) * Tl::kPStride + tx + kTx * jj] = ds[i][jj];
    }
    __syncthreads();
    accumulate_pv<RM, DN, D>(dss, Tl::kPStride, ks, BC, ty, tx, acc);  // dQ += dS K
  }
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int r = ty * RM + i;
    if (r >= rows) continue;
    T* dst =
        dq + (static_cast<std::size_t>(b) * g.s + r0 + r) * g.c + static_cast<std::size_t>(h) * g.d;
#pragma unroll
    for (int dd = 0; dd < DN; ++dd) {
      const int x = tx + kTx * dd;
      if (x < g.d) dst[x] = from_float<T>(acc[i][dd] * g.scale);
    }
  }
}

template <int D, typename T>
__global__ void __launch_bounds__(kThreads)
    dkv_kernel(const T* dout, const T* q, const float* lse, const float* dvec,
               const __grid_constant__ Shape<T> g) {
  using Tl = Tiles<D>;
  constexpr int BR = Tl::kBR, BC = Tl::kBC, RM = BR / kTy, CN = BC / kTx, DN = D / kTx;
  constexpr int KM = BC / kTy;  // key rows of the dK, dV accumulators per thread
  PLAIT_DYNAMIC_SHARED(float, smem);
  const BackwardTiles<D> t(smem);
  float *qs = t.qs, *dos = t.dos, *ks = t.ks, *vs = t.vs, *ps = t.ps, *dss = t.dss;
  float *row_lse = t.row_lse, *row_d = t.row_d;
  int* row_first = t.row_first;
  __shared__ const T* k_rows[BC];
  __shared__ float* dk_rows[BC];

  const int k0 = blockIdx.x * BC, j = blockIdx.y, b = blockIdx.z;
  const int keys = g.e - k0 < BC ? g.e - k0 : BC;
  const int ty = threadIdx.x / kTx, tx = threadIdx.x % kTx;
  load_key_tile<BC, D, T>(g, b, j, k0, g.e, k_rows, dk_rows, ks, vs);

  float dk[KM][DN], dv[KM][DN];
  zero(dk);
  zero(dv);
  // Query row r (position q_start + r) sees key k0 exactly when r >= k0 - q_start. Under a
  // document mask the query tiles whose first query's document begins after the key tile's last
  // key see none of it, nor do the tiles after them (documents begin in increasing order).
  const int first_row = k0 - g.q_start > 0 ? k0 - g.q_start : 0;
  for (int h = j * g.group; h < (j + 1) * g.group; ++h) {
    for (int r0 = (first_row / BR) * BR; r0 < g.s; r0 += BR) {
      if (first_key(g, b, g.q_start + r0) >= k0 + keys) break;
      const int rows = g.s - r0 < BR ? g.s - r0 : BR;
      __syncthreads();  // the previous tile's readers of qs, dos, ps, dss are done
      load_query_side<D, BR, T>(qs, dos, row_lse, row_d, row_first, q, dout, lse, dvec, g, b, h,
                                r0, rows);
      __syncthreads();
      float p[RM][CN], ds[RM][CN];
      tile_probabilities<RM, CN, D>(qs, dos, ks, vs, row_lse, row_d, row_first, g.d, g.scale,
                                    g.q_start + r0, rows, k0, g.e, ty, tx, p, ds);
#pragma unroll
      for (int i = 0; i < RM; ++i) {
#pragma unroll
        for (int jj = 0; jj < CN; ++jj) {
          const int at = (ty * RM + i) * Tl::kPStride + tx + kTx * jj;
          ps[at] = p[i][jj];
          dss[at] = ds[i][jj];
        }
      }
      __syncthreads();
      accumulate_ptx<KM, DN, D>(ps, Tl::kPStride, dos, BR, ty, tx, dv);  // dV += P^T dO
      accumulate_ptx<KM, DN, D>(dss, Tl::kPStride, qs, BR, ty, tx, dk);  // dK += dS^T Q
    }
  }
#pragma unroll
  for (int i = 0; i < KM; ++i) {
    const int kk = ty * KM + i;
    if (kk >= keys) continue;
    float* dkrow = dk_rows[kk];
#pragma unroll
    for (int dd = 0; dd < DN; ++dd) {
      const int x = tx + kTx * dd;
      if (x >= g.d) continue;
      dkrow[x] += dk[i][dd] * g.scale;
      dkrow[g.ckv + x] += dv[i][dd];
    }
  }
}

// The call's Shape, after the CPU kernel's checks and this kernel's limits.
template <typename T>
Shape<T> make_shape(const char* name, std::span<const KVBlock<T>> blocks, int batch, int s, int c,
                    int heads, int kv_heads, bool backward, DeviceDocumentMask mask) {
  if (blocks.size() > static_cast<std::size_t>(kMaxKVBlocks)) {
    throw Error(std::string(name) + ": " + std::to_string(blocks.size()) + " K/V blocks; at most " +
                std::to_string(kMaxKVBlocks) + " per call");
  }
  Shape<T> g{};
  g.blocks = static_cast<int>(blocks.size());
  int e = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    g.kv[i] = blocks[i].kv;
    g.dkv[i] = blocks[i].dkv;
    g.start[i] = e;
    e += blocks[i].length;
    if (backward && blocks[i].dkv == nullptr && blocks[i].length > 0) {
      throw Error(std::string(name) + ": K/V block " + std::to_string(i) +
                  " has no gradient buffer (dkv)");
    }
  }
  g.start[blocks.size()] = e;
  if (s <= 0 || e < s || heads <= 0 || c % heads != 0 || kv_heads <= 0 || heads % kv_heads != 0) {
    throw Error(std::string(name) +
                ": need 0 < s <= e, heads dividing C and kv_heads dividing heads; got s=" +
                std::to_string(s) + " e=" + std::to_string(e) + " C=" + std::to_string(c) +
                " heads=" + std::to_string(heads) + " kv_heads=" + std::to_string(kv_heads));
  }
  g.batch = batch;
  g.s = s;
  g.e = e;
  g.q_start = e - s;
  g.c = c;
  g.heads = heads;
  g.kv_heads = kv_heads;
  g.d = c / heads;
  g.group = heads / kv_heads;
  g.ckv = kv_heads * g.d;
  g.scale = 1.0f / sqrtf(static_cast<float>(g.d));
  if (mask.start != nullptr && mask.stride < e) {
    throw Error(std::string(name) + ": the document mask covers " + std::to_string(mask.stride) +
                " positions of a row, the keys reach " + std::to_string(e));
  }
  g.doc = mask.start;
  g.doc_stride = mask.stride;
  if (g.d > 128) {
    throw Error(std::string(name) + ": head dimension " + std::to_string(g.d) +
                " is above the 128 the kernels are built for");
  }
  return g;
}

template <int D, typename T>
void forward_with(T* out, float* lse, const T* q, const Shape<T>& g, const Context& ctx) {
  const dim3 grid(static_cast<unsigned>(ceil_div(g.s, Tiles<D>::kBR)),
                  static_cast<unsigned>(g.heads), static_cast<unsigned>(g.batch));
  launch("attention_forward", forward_kernel<D, T>, grid, dim3(kThreads), forward_shared_bytes<D>(),
         ctx, out, lse, q, g);
}

template <int D, typename T>
void backward_with(T* dq, const T* dout, const T* q, const float* lse, const float* dvec,
                   const Shape<T>& g, const Context& ctx) {
  const dim3 q_grid(static_cast<unsigned>(ceil_div(g.s, Tiles<D>::kBR)),
                    static_cast<unsigned>(g.heads), static_cast<unsigned>(g.batch));
  launch("attention_backward: dq", dq_kernel<D, T>, q_grid, dim3(kThreads), BackwardTiles<D>::bytes(),
         ctx, dq, dout, q, lse, dvec, g);
  const dim3 kv_grid(static_cast<unsigned>(ceil_div(g.e, Tiles<D>::kBC)),
                     static_cast<unsigned>(g.kv_heads), static_cast<unsigned>(g.batch));
  launch("attention_backward: dk, dv", dkv_kernel<D, T>, kv_grid, dim3(kThreads),
         BackwardTiles<D>::bytes(), ctx, dout, q, lse, dvec, g);
}

}  // namespace

template <typename T>
void attention_forward(T* out, float* lse, const T* q, std::span<const KVBlock<T>> blocks,
                       int batch, int s, int c, int heads, int kv_heads, const Context& ctx,
                       DeviceDocumentMask mask) {
  const Shape<T> g =
      make_shape("attention_forward (CUDA)", blocks, batch, s, c, heads, kv_heads, false, mask);
  if (batch == 0) return;
  if (g.d <= 64) {
    forward_with<64>(out, lse, q, g, ctx);
  } else {
    forward_with<128>(out, lse, q, g, ctx);
  }
}

template <typename T>
void attention_backward(T* dq, std::span<const KVBlock<T>> blocks, const T* dout, const T* q,
                        const T* out, const float* lse, int batch, int s, int c, int heads,
                        int kv_heads, float* workspace, const Context& ctx,
                        DeviceDocumentMask mask) {
  const Shape<T> g =
      make_shape("attention_backward (CUDA)", blocks, batch, s, c, heads, kv_heads, true, mask);
  if (batch == 0) return;
  const long long items = static_cast<long long>(batch) * s * heads;
  launch("attention_backward: rowsum(dout * out)", row_dot_kernel<T>,
         dim3(static_cast<unsigned>(ceil_div(items, static_cast<long long>(kRowDotWarps)))),
         dim3(kRowDotWarps * kWarp), 0, ctx, workspace, dout, out, batch, s, c, heads, g.d);
  if (g.d <= 64) {
    backward_with<64>(dq, dout, q, lse, workspace, g, ctx);
  } else {
    backward_with<128>(dq, dout, q, lse, workspace, g, ctx);
  }
}

template void attention_forward<float>(float*, float*, const float*,
                                       std::span<const KVBlock<float>>, int, int, int, int, int,
                                       const Context&, DeviceDocumentMask);
template void attention_forward<bf16>(bf16*, float*, const bf16*, std::span<const KVBlock<bf16>>,
                                      int, int, int, int, int, const Context&, DeviceDocumentMask);
template void attention_backward<float>(float*, std::span<const KVBlock<float>>, const float*,
                                        const float*, const float*, const float*, int, int, int,
                                        int, int, float*, const Context&, DeviceDocumentMask);
template void attention_backward<bf16>(bf16*, std::span<const KVBlock<bf16>>, const bf16*,
                                       const bf16*, const bf16*, const float*, int, int, int, int,
                                       int, float*, const Context&, DeviceDocumentMask);

}  // namespace plait::kernels::cuda
