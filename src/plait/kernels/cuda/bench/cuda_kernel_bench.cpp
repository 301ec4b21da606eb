// plait_cuda_bench: the GPU's two ceilings (device-to-device copy bandwidth; cuBLASLt GEMM rate in
// bf16 and fp32) and the throughput of each CUDA kernel at GPT-2 small's and TinyLlama's shapes
// (batch 8 x 1024 tokens), each set against the ceiling that bounds it (METHOD.md: "two numbers
// first"). Times are medians of CUDA-event timings after warm-up, on random data (never zeros).
// Prints one table; with --tsv FILE also writes it tab-separated (scripts/gpu-check.sh).
//
//   plait_cuda_bench [--quick] [--tsv FILE]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "plait/kernels/cuda/adamw.h"
#include "plait/kernels/cuda/attention.h"
#include "plait/kernels/cuda/context.h"
#include "plait/kernels/cuda/cross_entropy.h"
#include "plait/kernels/cuda/cuda_check.h"
#include "plait/kernels/cuda/embedding.h"
#include "plait/kernels/cuda/gelu.h"
#include "plait/kernels/cuda/gemm.h"
#include "plait/kernels/cuda/grad_norm.h"
#include "plait/kernels/cuda/layernorm.h"
#include "plait/kernels/cuda/rmsnorm.h"
#include "plait/kernels/cuda/rotary.h"
#include "plait/kernels/cuda/swiglu.h"

namespace plait::kernels::cuda {
namespace {

// Device memory of n elements of T filled with uniform values in [-scale, scale) (xorshift64*,
// generated on the host once per buffer).
template <typename T>
class Buffer {
 public:
  Buffer(std::size_t n, float scale, std::uint64_t seed) : n_(n) {
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&p_), std::max<std::size_t>(n, 1) * sizeof(T)),
               "bench: cudaMalloc of " + std::to_string(n * sizeof(T) >> 20) + " MiB");
    std::vector<T> host(n);
    std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (auto& v : host) {
      x ^= x >> 12;
      x ^= x << 25;
      x ^= x >> 27;
      const float u = static_cast<float>((x * 0x2545F4914F6CDD1Dull) >> 40) / 16777216.0f;
      const float value = (2.0f * u - 1.0f) * scale;
      if constexpr (std::is_same_v<T, bf16>) {
        v = __float2bfloat16(value);
      } else {
        v = static_cast<T>(value);
      }
    }
    check_cuda(cudaMemcpy(p_, host.data(), n * sizeof(T), cudaMemcpyHostToDevice), "bench: upload");
  }
  ~Buffer() { cudaFree(p_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  T* get() const { return p_; }
  std::size_t bytes() const { return n_ * sizeof(T); }

 private:
  T* p_ = nullptr;
  std::size_t n_;
};

// Median milliseconds of `reps` runs of f after `warmup` runs, timed with events on ctx's stream.
double median_ms(const Context& ctx, const std::function<void()>& f, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) f();
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "bench: event");
  check_cuda(cudaEventCreate(&stop), "bench: event");
  std::vector<float> times;
  for (int i = 0; i < reps; ++i) {
    check_cuda(cudaEventRecord(start, ctx.stream()), "bench: record");
    f();
    check_cuda(cudaEventRecord(stop, ctx.stream()), "bench: record");
    check_cuda(cudaEventSynchronize(stop), "bench: synchronize");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start, stop), "bench: elapsed");
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

struct Row {
  std::string name;
  double ms;
  double rate;       // GB/s or TFLOP/s
  const char* unit;  // "GB/s" or "TFLOP/s"
  double fraction;   // of the ceiling that bounds it
  const char* ceiling;
};

class Bench {
 public:
  Bench(const Context& ctx, bool quick) : ctx_(ctx), quick_(quick) {}

  int reps() const { return quick_ ? 5 : 20; }

  // A memory-bound kernel moving `bytes` (each input read once, each output written once).
  void bandwidth(const std::string& name, double bytes, const std::function<void()>& f) {
    const double ms = median_ms(ctx_, f, 3, reps());
    const double gbs = bytes / (ms * 1e-3) / 1e9;
    add({name, ms, gbs, "GB/s", copy_gbs_ > 0 ? gbs / copy_gbs_ : 0, "copy"});
  }
  // A kernel doing `flops` floating-point operations.
  void compute(const std::string& name, double flops, const std::function<void()>& f,
               double ceiling_tflops, const char* ceiling) {
    const double ms = median_ms(ctx_, f, 3, reps());
    const double tf = flops / (ms * 1e-3) / 1e12;
    add({name, ms, tf, "TFLOP/s", ceiling_tflops > 0 ? tf / ceiling_tflops : 0, ceiling});
  }
  void set_copy(double gbs) { copy_gbs_ = gbs; }
  const std::vector<Row>& rows() const { return rows_; }

 private:
  void add(Row r) {
    std::printf("%-52s %9.3f ms %10.1f %-8s %6.1f%% of %s\n", r.name.c_str(), r.ms, r.rate, r.unit,
                100 * r.fraction, r.ceiling);
    std::fflush(stdout);
    rows_.push_back(std::move(r));
  }
  const Context& ctx_;
  bool quick_;
  double copy_gbs_ = 0;
  std::vector<Row> rows_;
};

// GEMM rate: C (m,n) = A (m,k) B(n,k)^T, the engine's forward layout.
template <typename T>
double gemm_tflops(Bench& bench, const Context& ctx, const std::string& name, int m, int n, int k,
                   double ceiling, const char* ceiling_name) {
  Buffer<T> a(std::size_t(m) * k, 1, 1), b(std::size_t(n) * k, 1, 2), c(std::size_t(m) * n, 1, 3);
  const double flops = 2.0 * m * n * k;
  bench.compute(
      name, flops,
      [&] {
        gemm<T, T>(false, true, m, n, k, 1.0f, a.get(), k, b.get(), k, 0.0f, c.get(), n, ctx);
      },
      ceiling, ceiling_name);
  return bench.rows().back().rate;
}

void run(bool quick, const std::string& tsv) {
  const Context ctx;
  cudaDeviceProp prop{};
  int device = 0;
  check_cuda(cudaGetDevice(&device), "bench: cudaGetDevice");
  check_cuda(cudaGetDeviceProperties(&prop, device), "bench: cudaGetDeviceProperties");
  std::printf(
      "device: %s, compute capability %d.%d, %d SMs, %.0f MiB L2, %.1f GiB, %zu KiB shared "
      "memory per block (opt-in)\n",
      prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.l2CacheSize / 1048576.0,
      prop.totalGlobalMem / 1073741824.0, prop.sharedMemPerBlockOptin / 1024);
  Bench bench(ctx, quick);

  // Ceiling 1: device-to-device copy, bytes read + written (METHOD.md).
  {
    const std::size_t bytes = std::size_t{1} << 30;
    Buffer<std::uint8_t> src(bytes, 1, 4), dst(bytes, 1, 5);
    bench.bandwidth("copy 1 GiB device to device (ceiling)", 2.0 * bytes, [&] {
      check_cuda(
          cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, ctx.stream()),
          "bench: copy");
    });
    bench.set_copy(bench.rows().back().rate);
  }
  // Ceiling 2: the bf16 GEMM peak through cuBLASLt on random data; fp32 (no TF32) for reference.
  const int g = quick ? 4096 : 8192;
  const double peak = gemm_tflops<bf16>(
      bench, ctx, "gemm bf16 " + std::to_string(g) + "^3 (ceiling)", g, g, g, 0, "-");
  gemm_tflops<float>(bench, ctx, "gemm fp32 4096^3 (CUBLAS_COMPUTE_32F)", 4096, 4096, 4096, 0, "-");

  // GPT-2 small: B x T = 8 x 1024 tokens, C = 768, 12 heads, vocabulary 50257.
  const int B = 8, T = 1024, N = B * T, C = 768, H = 12, V = 50257;
  gemm_tflops<bf16>(bench, ctx, "gemm bf16 GPT-2 qkv (8192 x 2304 x 768)", N, 3 * C, C, peak,
                    "gemm peak");
  gemm_tflops<bf16>(bench, ctx, "gemm bf16 GPT-2 fc (8192 x 3072 x 768)", N, 4 * C, C, peak,
                    "gemm peak");
  gemm_tflops<bf16>(bench, ctx, "gemm bf16 GPT-2 lm head (8192 x 50257 x 768)", N, V, C, peak,
                    "gemm peak");
  {
    Buffer<bf16> x(std::size_t(N) * C, 1, 6), out(std::size_t(N) * C, 1, 7), w(C, 1, 8), b(C, 1, 9);
    Buffer<float> mean(N, 1, 10), rstd(N, 1, 11), dw(C, 1, 12), db(C, 1, 13);
    const double io = 2.0 * N * C * sizeof(bf16);
    bench.bandwidth("layernorm forward bf16 (8192 x 768)", io, [&] {
      layernorm_forward<bf16>(out.get(), mean.get(), rstd.get(), x.get(), w.get(), b.get(), N, C,
                              1e-5, ctx);
    });
    bench.bandwidth("layernorm backward input bf16", 3.0 * N * C * sizeof(bf16), [&] {
      layernorm_backward_input<bf16>(out.get(), nullptr, x.get(), x.get(), w.get(), mean.get(),
                                     rstd.get(), N, C, ctx);
    });
    bench.bandwidth("layernorm backward weight bf16", 2.0 * N * C * sizeof(bf16), [&] {
      layernorm_backward_weight<bf16>(dw.get(), db.get(), x.get(), x.get(), mean.get(), rstd.get(),
                                      N, C, ctx);
    });
  }
  {
    const std::size_t n = std::size_t(N) * 4 * C;
    Buffer<bf16> x(n, 2, 14), y(n, 1, 15);
    bench.bandwidth("gelu forward bf16 (8192 x 3072)", 2.0 * n * sizeof(bf16),
                    [&] { gelu_forward<bf16>(y.get(), x.get(), n, ctx); });
    bench.bandwidth("gelu backward bf16", 3.0 * n * sizeof(bf16),
                    [&] { gelu_backward<bf16>(y.get(), x.get(), y.get(), n, ctx); });
  }
  // Attention: causal, so half of the 4 B H T^2 d multiply-adds of forward (QK^T and PV).
  auto attention = [&](const std::string& model, int heads, int kv_heads, int d,
                       std::vector<int> lengths) {
    const int c = heads * d, ckv = kv_heads * d, s = lengths.back();
    int e = 0;
    for (int l : lengths) e += l;
    Buffer<bf16> q(std::size_t(B) * s * c, 1, 16), out(std::size_t(B) * s * c, 1, 17),
        dout(std::size_t(B) * s * c, 1, 18), dq(std::size_t(B) * s * c, 1, 19);
    std::vector<std::unique_ptr<Buffer<bf16>>> kv;
    std::vector<std::unique_ptr<Buffer<float>>> dkv;
    std::vector<KVBlock<bf16>> blocks;
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      kv.push_back(
          std::make_unique<Buffer<bf16>>(std::size_t(B) * lengths[i] * 2 * ckv, 1, 20 + i));
      dkv.push_back(
          std::make_unique<Buffer<float>>(std::size_t(B) * lengths[i] * 2 * ckv, 0.01f, 40 + i));
      blocks.push_back({kv.back()->get(), dkv.back()->get(), lengths[i]});
    }
    Buffer<float> lse(std::size_t(B) * heads * s, 1, 60),
        ws(attention_backward_workspace(B, s, heads), 1, 61);
    // Visible (query, key) pairs: s queries at offset e - s see e - s + r + 1 keys.
    const double pairs = double(s) * (e - s) + double(s) * (s + 1) / 2;
    const double fwd = 4.0 * B * heads * pairs * d,
                 bwd = 2.5 * fwd;  // dq kernel 3 products, dkv 4; FA2 counts 2.5x
    std::string shape =
        model + " attention bf16 (B=8, s=" + std::to_string(s) + ", e=" + std::to_string(e) + ")";
    bench.compute(
        shape + " forward", fwd,
        [&] {
          attention_forward<bf16>(out.get(), lse.get(), q.get(), blocks, B, s, c, heads, kv_heads,
                                  ctx);
        },
        peak, "gemm peak");
    bench.compute(
        shape + " backward", bwd,
        [&] {
          attention_backward<bf16>(dq.get(), blocks, dout.get(), q.get(), out.get(), lse.get(), B,
                                   s, c, heads, kv_heads, ws.get(), ctx);
        },
        peak, "gemm peak");
  };
  attention("GPT-2", H, H, 64, {T});
  attention("GPT-2 Seq1F1B 2nd of 4 segments", H, H, 64, {256, 256});
  {
    Buffer<bf16> logits(std::size_t(N) * V, 4, 62);
    Buffer<float> losses(N, 1, 63);
    std::vector<std::int32_t> host(N);
    for (int i = 0; i < N; ++i) host[i] = (i * 7919) % V;
    std::int32_t* targets = nullptr;
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&targets), N * sizeof(std::int32_t)),
               "bench: targets");
    check_cuda(cudaMemcpy(targets, host.data(), N * sizeof(std::int32_t), cudaMemcpyHostToDevice),
               "bench: targets");
    bench.bandwidth("cross entropy bf16 (8192 x 50257, in place)", 3.0 * N * V * sizeof(bf16), [&] {
      cross_entropy_forward_backward<bf16>(logits.get(), losses.get(), targets, N, V, 1.0 / N, ctx);
    });
    Buffer<bf16> wte(std::size_t(V) * C, 1, 64), wpe(std::size_t(T) * C, 1, 65),
        emb(std::size_t(N) * C, 1, 66);
    Buffer<float> dwte(std::size_t(V) * C, 0, 67), dwpe(std::size_t(T) * C, 0, 68);
    bench.bandwidth("embedding forward bf16 (8192 x 768)", 3.0 * N * C * sizeof(bf16), [&] {
      embedding_forward<bf16>(emb.get(), targets, wte.get(), wpe.get(), B, T, C, 0, V, ctx);
    });
    bench.bandwidth(
        "embedding backward bf16 -> fp32", double(N) * C * (sizeof(bf16) + 2 * sizeof(float)), [&] {
          embedding_backward<bf16>(dwte.get(), dwpe.get(), emb.get(), targets, B, T, C, 0, V, ctx);
        });
    cudaFree(targets);
  }
  {
    const std::size_t n = 124439808;  // GPT-2 small's parameters
    Buffer<float> p(n, 1, 69), gr(n, 0.01f, 70), m(n, 0, 71), v(n, 0, 72);
    Buffer<bf16> copy(n, 0, 73);
    Buffer<double> result(1, 0, 74), ws(sum_of_squares_workspace(n), 0, 75);
    int step = 0;
    bench.bandwidth("adamw fp32 master + bf16 copy (124M parameters)", double(n) * (7 * 4 + 2),
                    [&] {
                      adamw_update(p.get(), copy.get(), gr.get(), m.get(), v.get(), n,
                                   {3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, ++step, 1.0f}, ctx);
                    });
    bench.bandwidth("sum of squares fp32 (124M)", double(n) * 4,
                    [&] { sum_of_squares(result.get(), gr.get(), n, ws.get(), ctx); });
  }
  // TinyLlama-1.1B: C = 2048, 32 heads sharing 4 K/V heads, d = 64, FFN 5632, rotary theta 1e4.
  {
    const int c = 2048, f = 5632;
    Buffer<bf16> x(std::size_t(N) * c, 1, 76), out(std::size_t(N) * c, 1, 77), w(c, 1, 78);
    Buffer<float> rstd(N, 1, 79);
    bench.bandwidth("rmsnorm forward bf16 (8192 x 2048)", 2.0 * N * c * sizeof(bf16), [&] {
      rmsnorm_forward<bf16>(out.get(), rstd.get(), x.get(), w.get(), N, c, 1e-5, ctx);
    });
    bench.bandwidth("rotary forward bf16 (q: 8192 x 32 heads x 64)", 2.0 * N * c * sizeof(bf16),
                    [&] { rotary_forward<bf16>(x.get(), B, T, 32, 64, c, 0, 10000.0, ctx); });
    Buffer<bf16> gu(std::size_t(N) * 2 * f, 2, 80), act(std::size_t(N) * f, 1, 81);
    bench.bandwidth("swiglu forward bf16 (8192 x 5632)", 3.0 * N * f * sizeof(bf16),
                    [&] { swiglu_forward<bf16>(act.get(), gu.get(), N, f, ctx); });
    bench.bandwidth("swiglu backward bf16", 5.0 * N * f * sizeof(bf16),
                    [&] { swiglu_backward<bf16>(gu.get(), act.get(), gu.get(), N, f, ctx); });
    gemm_tflops<bf16>(bench, ctx, "gemm bf16 TinyLlama gate|up (8192 x 11264 x 2048)", N, 2 * f, c,
                      peak, "gemm peak");
  }
  attention("TinyLlama", 32, 4, 64, {T});
  ctx.synchronize();

  if (!tsv.empty()) {
    std::ofstream out(tsv);
    out << "kernel\tms\trate\tunit\tfraction\tof\n";
    for (const Row& r : bench.rows()) {
      out << r.name << '\t' << r.ms << '\t' << r.rate << '\t' << r.unit << '\t' << r.fraction
          << '\t' << r.ceiling << '\n';
    }
  }
}

}  // namespace
}  // namespace plait::kernels::cuda

int main(int argc, char** argv) {
  bool quick = false;
  std::string tsv;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--tsv") == 0 && i + 1 < argc) {
      tsv = argv[++i];
    } else {
      std::fprintf(stderr, "usage: plait_cuda_bench [--quick] [--tsv FILE]\n");
      return 2;
    }
  }
  const std::string why = plait::kernels::cuda::cuda_unavailable_reason();
  if (!why.empty()) {
    std::fprintf(stderr, "plait_cuda_bench: no CUDA device: %s\n", why.c_str());
    return 1;
  }
  try {
    plait::kernels::cuda::run(quick, tsv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "plait_cuda_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
