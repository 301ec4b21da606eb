// The CUDA FlashAttention-2 kernels against the CPU attention (kernels/attention.h): whole
// sequences, Seq1F1B segments whose K/V prefix comes in blocks of uneven lengths (straddling the
// kernels' tiles), grouped-query and multi-query heads, both head-dimension specialisations
// (d <= 64, d <= 128), several query and key tiles, fp32 and bf16; and with document masks (packed
// documents: rows of several documents, a segment starting mid-document, documents across the
// kernels' tiles), against the CPU kernel with the same mask.
#include "plait/kernels/cuda/attention.h"

#include <omp.h>

#include "cuda_test_support.h"
#include "plait/kernels/attention.h"

namespace plait::kernels::cuda {
namespace {

using namespace plait::kernels::cuda::testing;

struct Case {
  int batch, heads, kv_heads, d;
  std::vector<int> lengths;  // K/V blocks; the queries are the last block's positions
  std::vector<std::vector<int>> documents = {};  // per row, where documents start (none: causal)
  int c() const { return heads * d; }
  int ckv() const { return kv_heads * d; }
  int s() const { return lengths.back(); }
  int e() const {
    int e = 0;
    for (int l : lengths) e += l;
    return e;
  }
  std::size_t block_size(std::size_t i) const {
    return std::size_t(batch) * lengths[i] * 2 * ckv();
  }
  std::string describe() const {
    std::string l;
    for (int x : lengths) {
      if (!l.empty()) l += ",";
      l += std::to_string(x);
    }
    return "B=" + std::to_string(batch) + " heads=" + std::to_string(heads) + "/" +
           std::to_string(kv_heads) + " d=" + std::to_string(d) + " blocks {" + l + "}" +
           (documents.empty() ? "" : " documents");
  }
  // The document mask (kernels/attention.h): where each position's document starts, B x e.
  std::vector<std::int32_t> mask() const {
    std::vector<std::int32_t> m;
    for (const std::vector<int>& starts : documents) {
      for (int p = 0, j = 0; p < e(); ++p) {
        while (j + 1 < static_cast<int>(starts.size()) && starts[j + 1] <= p) ++j;
        m.push_back(starts[j]);
      }
    }
    return m;
  }
};

// The mask in device memory.
class DeviceMask {
 public:
  explicit DeviceMask(const std::vector<std::int32_t>& host) {
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&data_), (host.size() + 1) * sizeof(std::int32_t)), "test: cudaMalloc");
    check_cuda(cudaMemcpy(data_, host.data(), host.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice),
               "test: upload");
  }
  ~DeviceMask() { cudaFree(data_); }
  DeviceMask(const DeviceMask&) = delete;
  DeviceMask& operator=(const DeviceMask&) = delete;
  const std::int32_t* get() const { return data_; }

 private:
  std::int32_t* data_ = nullptr;
};

template <typename T>
void check_attention(const Context& ctx, const Case& cs) {
  using R = Reference<T>;
  const std::string name = std::string("attention ") + type_name(T{}) + " " + cs.describe();
  const int s = cs.s(), c = cs.c(), nb = static_cast<int>(cs.lengths.size());
  const std::size_t qn = std::size_t(cs.batch) * s * c;
  const auto q = stored<T>(random_vector(qn, 61));
  const auto dout = stored<T>(random_vector(qn, 62));
  std::vector<std::vector<double>> kv, dkv0;
  for (int i = 0; i < nb; ++i) {
    kv.push_back(stored<T>(random_vector(cs.block_size(i), 63 + i)));
    dkv0.push_back(random_vector(cs.block_size(i), 163 + i));  // fp32, accumulated into
  }

  // CPU reference (fp32 kernel in fp32 mode, fp64 on the rounded inputs in bf16 mode).
  const auto rq = as<R>(q), rdout = as<R>(dout);
  std::vector<std::vector<R>> rkv, rdkv;
  std::vector<kernels::KVBlock<R>> rblocks;
  for (int i = 0; i < nb; ++i) {
    rkv.push_back(as<R>(kv[i]));
    rdkv.push_back(as<R>(dkv0[i]));
  }
  for (int i = 0; i < nb; ++i) rblocks.push_back({rkv[i].data(), rdkv[i].data(), cs.lengths[i]});
  std::vector<R> out(qn), lse(std::size_t(cs.batch) * cs.heads * s), dq(qn);
  std::vector<R> ws(kernels::attention_backward_workspace(cs.d, omp_get_max_threads()));
  const std::vector<std::int32_t> mask = cs.mask();
  const kernels::DocumentMask host_mask = mask.empty() ? kernels::DocumentMask{} : kernels::DocumentMask{mask.data(), cs.e()};
  kernels::attention_forward<R>(out.data(), lse.data(), rq.data(), rblocks, cs.batch, s, c,
                                cs.heads, cs.kv_heads, host_mask);
  kernels::attention_backward<R>(dq.data(), rblocks, rdout.data(), rq.data(), out.data(),
                                 lse.data(), cs.batch, s, c, cs.heads, cs.kv_heads, ws.data(), host_mask);

  // GPU.
  DeviceBuffer<T> gq(q), gdout(dout), gout(qn), gdq(qn);
  DeviceBuffer<float> glse(std::size_t(cs.batch) * cs.heads * s),
      gws(attention_backward_workspace(cs.batch, s, cs.heads));
  std::vector<std::unique_ptr<DeviceBuffer<T>>> gkv;
  std::vector<std::unique_ptr<DeviceBuffer<float>>> gdkv;
  std::vector<KVBlock<T>> gblocks;
  for (int i = 0; i < nb; ++i) {
    gkv.push_back(std::make_unique<DeviceBuffer<T>>(kv[i]));
    gdkv.push_back(std::make_unique<DeviceBuffer<float>>(dkv0[i]));
    gblocks.push_back({gkv[i]->get(), gdkv[i]->get(), cs.lengths[i]});
  }
  gout.poison();
  gdq.poison();
  glse.poison();
  const DeviceMask gmask(mask);
  const DeviceDocumentMask device_mask = mask.empty() ? DeviceDocumentMask{} : DeviceDocumentMask{gmask.get(), cs.e()};
  attention_forward<T>(gout.get(), glse.get(), gq.get(), gblocks, cs.batch, s, c, cs.heads,
                       cs.kv_heads, ctx, device_mask);
  attention_backward<T>(gdq.get(), gblocks, gdout.get(), gq.get(), gout.get(), glse.get(), cs.batch,
                        s, c, cs.heads, cs.kv_heads, gws.get(), ctx, device_mask);
  ctx.synchronize();
  // bf16 roundings: out 1; dq 2 (its own rounding, and D = rowsum(dout * out) read from the
  // rounded output where the fp64 CPU reference reads its unrounded one); dK/dV, accumulated in
  // fp32, 1 (that D). The CPU kernel is FlashAttention-2 too, so the lse are compared as well.
  expect_close(name + " out", gout.download(), as_double(out), bound_for<T>(1));
  expect_close(name + " lse", glse.download(), as_double(lse), bound_for<T>(1));
  expect_close(name + " dq", gdq.download(), as_double(dq), bound_for<T>(2));
  for (int i = 0; i < nb; ++i) {
    expect_close(name + " dkv[" + std::to_string(i) + "]", gdkv[i]->download(), as_double(rdkv[i]),
                 bound_for<T>(1));
  }
}

class CudaAttention : public CudaKernelTest {};

const Case kWhole{2, 4, 4, 16, {37}};               // multi-head, one block, one tile
const Case kSegmentGqa{2, 4, 2, 16, {23, 14, 30}};  // a segment at 37 after two blocks
const Case kMultiQuery{1, 3, 1, 8, {5, 70}};        // 70 queries: two query tiles
const Case kWideHeads{1, 2, 1, 72, {40, 33}};       // d = 72: the d <= 128 kernels
const Case kManyTiles{1, 2, 2, 16, {60, 1, 130}};   // 3 query tiles, 4 key tiles, a 1-long block
// Packed documents: the segment [37, 67) starts mid-document in row 0 and just after a document
// start in row 1; documents of one token; documents across the key and query tiles.
const Case kSegmentDocuments{2, 4, 2, 16, {23, 14, 30}, {{0, 20, 40, 41, 50}, {0, 36, 60}}};
const Case kManyTileDocuments{1, 2, 2, 16, {60, 1, 130}, {{0, 10, 75, 130, 131, 190}}};
const Case kWideDocuments{1, 2, 1, 72, {40, 33}, {{0, 33, 41, 70}}};

TEST_F(CudaAttention, WholeSequenceMatchesCpuFp32) { check_attention<float>(ctx(), kWhole); }
TEST_F(CudaAttention, SegmentWithPrefixBlocksGqaMatchesCpuFp32) {
  check_attention<float>(ctx(), kSegmentGqa);
}
TEST_F(CudaAttention, MultiQueryMatchesCpuFp32) { check_attention<float>(ctx(), kMultiQuery); }
TEST_F(CudaAttention, HeadDim72MatchesCpuFp32) { check_attention<float>(ctx(), kWideHeads); }
TEST_F(CudaAttention, ManyTilesMatchesCpuFp32) { check_attention<float>(ctx(), kManyTiles); }
TEST_F(CudaAttention, SegmentWithPrefixBlocksGqaMatchesCpuBf16) {
  check_attention<bf16>(ctx(), kSegmentGqa);
}
TEST_F(CudaAttention, HeadDim72MatchesCpuBf16) { check_attention<bf16>(ctx(), kWideHeads); }
TEST_F(CudaAttention, MultiQueryMatchesCpuBf16) { check_attention<bf16>(ctx(), kMultiQuery); }
TEST_F(CudaAttention, ManyTilesMatchesCpuBf16) { check_attention<bf16>(ctx(), kManyTiles); }
TEST_F(CudaAttention, DocumentMasksMatchCpuFp32) {
  for (const Case& cs : {kSegmentDocuments, kManyTileDocuments, kWideDocuments}) check_attention<float>(ctx(), cs);
}
TEST_F(CudaAttention, DocumentMasksMatchCpuBf16) {
  for (const Case& cs : {kSegmentDocuments, kManyTileDocuments, kWideDocuments}) check_attention<bf16>(ctx(), cs);
}

// GPT-2 small's and TinyLlama's head shapes at a full tile count (d = 64, 12 heads; d = 64,
// 32 heads sharing 4 K/V heads), two segments of 128.
TEST_F(CudaAttention, ModelShapesMatchCpuFp32) {
  check_attention<float>(ctx(), Case{1, 12, 12, 64, {128, 128}});
  check_attention<float>(ctx(), Case{1, 32, 4, 64, {128, 128}});
}
TEST_F(CudaAttention, ModelShapesMatchCpuBf16) {
  check_attention<bf16>(ctx(), Case{1, 12, 12, 64, {128, 128}});
  check_attention<bf16>(ctx(), Case{1, 32, 4, 64, {128, 128}});
}

TEST_F(CudaAttention, RejectsHeadDimAbove128) {
  DeviceBuffer<float> q(2 * 130), out(2 * 130), lse(2), kv(2 * 260);
  const KVBlock<float> block{kv.get(), nullptr, 2};  // cuda::KVBlock
  EXPECT_THROW(
      attention_forward<float>(out.get(), lse.get(), q.get(), {&block, 1}, 1, 2, 130, 1, 1, ctx()),
      plait::Error);
}

}  // namespace
}  // namespace plait::kernels::cuda
