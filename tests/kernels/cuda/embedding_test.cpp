// The CUDA embedding and cross-entropy kernels against the CPU kernels (kernels/embedding.h,
// cross_entropy.h).
#include "plait/kernels/cuda/embedding.h"

#include <cstdint>
#include <random>

#include "cuda_test_support.h"
#include "plait/kernels/cross_entropy.h"
#include "plait/kernels/cuda/cross_entropy.h"
#include "plait/kernels/embedding.h"

namespace plait::kernels::cuda {
namespace {

using namespace plait::kernels::cuda::testing;

// Tokens drawn from a small range so that rows repeat (the backward's collisions).
std::vector<std::int32_t> random_tokens(std::size_t n, int vocab, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> dist(0, vocab - 1);
  std::vector<std::int32_t> t(n);
  for (auto& x : t) x = dist(rng);
  return t;
}

class DeviceTokens {
 public:
  explicit DeviceTokens(const std::vector<std::int32_t>& t) : n_(t.size()) {
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&data_), t.size() * sizeof(std::int32_t)),
               "test: cudaMalloc");
    check_cuda(cudaMemcpy(data_, t.data(), t.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice),
               "test: upload");
  }
  ~DeviceTokens() { cudaFree(data_); }
  DeviceTokens(const DeviceTokens&) = delete;
  DeviceTokens& operator=(const DeviceTokens&) = delete;
  const std::int32_t* get() const { return data_; }

 private:
  std::int32_t* data_ = nullptr;
  std::size_t n_;
};

template <typename T>
void check_embedding(const Context& ctx, int batch, int s, int c, int pos0, int vocab,
                     bool positions) {
  using R = Reference<T>;
  const std::string name = std::string("embedding ") + type_name(T{}) +
                           (positions ? " wte+wpe" : " wte") + " pos0=" + std::to_string(pos0);
  const int n = batch * s, max_pos = pos0 + s + 3;
  const auto tokens = random_tokens(std::size_t(n), vocab, 41);
  const auto wte = stored<T>(random_vector(std::size_t(vocab) * c, 42));
  const auto wpe = stored<T>(random_vector(std::size_t(max_pos) * c, 43));
  const auto dy = stored<T>(random_vector(std::size_t(n) * c, 44));
  const auto dwte0 = random_vector(std::size_t(vocab) * c, 45);
  const auto dwpe0 = random_vector(std::size_t(max_pos) * c, 46);

  std::vector<R> out(std::size_t(n) * c), dwte = as<R>(dwte0), dwpe = as<R>(dwpe0);
  const auto rwte = as<R>(wte), rwpe = as<R>(wpe), rdy = as<R>(dy);
  kernels::embedding_forward<R>(out.data(), tokens.data(), rwte.data(),
                                positions ? rwpe.data() : nullptr, batch, s, c, pos0, vocab);
  kernels::embedding_backward<R>(dwte.data(), positions ? dwpe.data() : nullptr, rdy.data(),
                                 tokens.data(), batch, s, c, pos0);

  DeviceTokens gtok(tokens);
  DeviceBuffer<T> gwte(wte), gwpe(wpe), gdy(dy), gout(out.size());
  DeviceBuffer<float> gdwte(dwte0), gdwpe(dwpe0);
  gout.poison();
  embedding_forward<T>(gout.get(), gtok.get(), gwte.get(), positions ? gwpe.get() : nullptr, batch,
                       s, c, pos0, vocab, ctx);
  embedding_backward<T>(gdwte.get(), positions ? gdwpe.get() : nullptr, gdy.get(), gtok.get(),
                        batch, s, c, pos0, vocab, ctx);
  ctx.synchronize();
  expect_close(name + " out", gout.download(), as_double(out), bound_for<T>(positions ? 1 : 0));
  // The backward adds in the CPU kernel's order: in fp32 the same bits.
  expect_close(name + " dwte", gdwte.download(), as_double(dwte),
               std::is_same_v<T, float> ? 0.0 : kFp32Bound);
  expect_close(name + " dwpe", gdwpe.download(), as_double(dwpe),
               std::is_same_v<T, float> ? 0.0 : kFp32Bound);
}

template <typename T>
void check_cross_entropy(const Context& ctx, int n, int v, double loss_scale) {
  using R = Reference<T>;
  const std::string name = std::string("cross entropy ") + type_name(T{}) +
                           " n=" + std::to_string(n) + " v=" + std::to_string(v);
  const auto logits = stored<T>(random_vector(std::size_t(n) * v, 47, 4.0));
  const auto targets = random_tokens(std::size_t(n), v, 48);
  std::vector<R> dlogits = as<R>(logits), losses(n);
  kernels::cross_entropy_forward_backward<R>(dlogits.data(), losses.data(), targets.data(), n, v,
                                             loss_scale);
  DeviceTokens gt(targets);
  DeviceBuffer<T> glogits(logits);
  DeviceBuffer<float> glosses(n);
  glosses.poison();
  cross_entropy_forward_backward<T>(glogits.get(), glosses.get(), gt.get(), n, v, loss_scale, ctx);
  ctx.synchronize();
  expect_close(name + " losses", glosses.download(), as_double(losses), kFp32Bound);
  expect_close(name + " dlogits", glogits.download(), as_double(dlogits), bound_for<T>(1));
}

class CudaEmbedding : public CudaKernelTest {};

TEST_F(CudaEmbedding, MatchesCpuFp32) {
  check_embedding<float>(ctx(), 2, 9, 70, 0, 11, true);
  check_embedding<float>(ctx(), 3, 5, 300, 17, 200, true);  // a segment at position 17
  check_embedding<float>(ctx(), 2, 9, 40, 4, 13, false);    // LLaMA: no positions
}
TEST_F(CudaEmbedding, MatchesCpuBf16) {
  check_embedding<bf16>(ctx(), 3, 5, 300, 17, 200, true);
  check_embedding<bf16>(ctx(), 2, 9, 40, 4, 13, false);
}

TEST_F(CudaEmbedding, TokenOutsideVocabularyGivesNanRow) {
  const int c = 8, vocab = 5;
  DeviceTokens gtok(std::vector<std::int32_t>{1, 7});
  DeviceBuffer<float> gwte(random_vector(std::size_t(vocab) * c, 49)), gout(2 * c);
  embedding_forward<float>(gout.get(), gtok.get(), gwte.get(), nullptr, 1, 2, c, 0, vocab, ctx());
  sync();
  const auto out = gout.download();
  for (int j = 0; j < c; ++j) {
    EXPECT_TRUE(std::isfinite(out[j]));
    EXPECT_TRUE(std::isnan(out[c + j]));
  }
}

class CudaCrossEntropy : public CudaKernelTest {};

TEST_F(CudaCrossEntropy, MatchesCpuFp32) {
  check_cross_entropy<float>(ctx(), 5, 7, 1.0);
  check_cross_entropy<float>(ctx(), 6, 5003, 1.0 / 6);  // more columns than threads
}
TEST_F(CudaCrossEntropy, MatchesCpuBf16) { check_cross_entropy<bf16>(ctx(), 6, 5003, 1.0 / 6); }

}  // namespace
}  // namespace plait::kernels::cuda
