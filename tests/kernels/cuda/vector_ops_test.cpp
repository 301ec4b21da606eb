// The CUDA fill, accumulate, convert and normal_init against the CPU kernels
// (kernels/vector_ops.h, normal_init.h): all are exact (one store, one addition, one rounding to
// nearest even or an exact widening, the same double formula rounded once), so the bound is 0 —
// normal_init on a GPU only up to CUDA's double log and cos, which the emulation takes from the
// host's libm.
#include <bit>
#include <cstdint>
#include <limits>

#include "cuda_test_support.h"
#include "plait/kernels/cuda/normal_init.h"
#include "plait/kernels/cuda/vector_ops.h"
#include "plait/kernels/normal_init.h"
#include "plait/kernels/vector_ops.h"

namespace plait::kernels::cuda {
namespace {

using namespace plait::kernels::cuda::testing;

class CudaVectorOps : public CudaKernelTest {};

TEST_F(CudaVectorOps, FillWritesEveryElement) {
  const std::size_t n = 1031;  // not a multiple of the block
  DeviceBuffer<float> d(n);
  d.poison();
  fill(d.get(), n, 0.75f, ctx());
  sync();
  expect_close("fill", d.download(), std::vector<double>(n, 0.75), 0.0);
}

TEST_F(CudaVectorOps, AccumulateMatchesCpu) {
  const std::size_t n = 1031;
  auto dst = as<float>(random_vector(n, 61));
  const auto src = as<float>(random_vector(n, 62));
  DeviceBuffer<float> gdst(as_double(dst)), gsrc(as_double(src));
  kernels::accumulate(dst.data(), src.data(), n);
  accumulate(gdst.get(), gsrc.get(), n, ctx());
  sync();
  expect_close("accumulate", gdst.download(), as_double(dst), 0.0);
}

// Raw bits through a device buffer (DeviceBuffer converts through doubles, which NaN payloads and
// the exact bits under test would not survive).
template <typename Bits, typename T>
std::vector<Bits> bits_of(const T* device, std::size_t n) {
  static_assert(sizeof(Bits) == sizeof(T));
  std::vector<Bits> host(n);
  check_cuda(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost),
             "test: download");
  return host;
}

template <typename T, typename Bits>
void upload_bits(T* device, const std::vector<Bits>& host) {
  static_assert(sizeof(Bits) == sizeof(T));
  check_cuda(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
             "test: upload");
}

// Every bf16 value, every midpoint between neighbours (the ties, which go to the even one), the
// fp32 values just either side of each midpoint, the largest finite fp32 (beyond the largest
// finite bf16: infinity), subnormals, signed zeros and infinities: the GPU's rounding is bitwise
// the CPU's (core/bf16.h) on all of them. NaNs only stay NaN (CUDA's canonical 0x7FFF, the CPU
// keeping the payload's top bits).
TEST_F(CudaVectorOps, ConvertToBf16MatchesCpuBitwise) {
  std::vector<float> src;
  for (std::uint32_t b = 0; b < 0x10000u; ++b) {
    const std::uint32_t u = b << 16;
    src.push_back(std::bit_cast<float>(u));
    if ((u & 0x7F800000u) == 0x7F800000u) continue;  // no midpoints above infinity or NaN
    const std::uint32_t mid = u | 0x8000u;
    for (std::uint32_t m : {mid - 1, mid, mid + 1}) src.push_back(std::bit_cast<float>(m));
  }
  src.push_back(std::numeric_limits<float>::max());
  src.push_back(-std::numeric_limits<float>::max());
  src.push_back(std::numeric_limits<float>::denorm_min());
  const std::size_t n = src.size();
  std::vector<plait::bf16> rounded(n);
  kernels::convert(rounded.data(), src.data(), n);
  DeviceBuffer<float> gsrc(n);
  DeviceBuffer<bf16> gdst(n);
  upload_bits(gsrc.get(), src);
  gdst.poison();
  convert(gdst.get(), gsrc.get(), n, ctx());
  sync();
  const auto gpu = bits_of<std::uint16_t>(gdst.get(), n);
  std::size_t mismatches = 0, nans = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const bool nan = std::isnan(src[i]);
    nans += nan;
    const bool ok = nan ? (gpu[i] & 0x7FFFu) > 0x7F80u : gpu[i] == rounded[i].bits;
    if (!ok && mismatches++ < 5) {
      ADD_FAILURE() << "convert of " << src[i] << " (0x" << std::hex
                    << std::bit_cast<std::uint32_t>(src[i]) << "): gpu 0x" << gpu[i] << ", cpu 0x"
                    << rounded[i].bits;
    }
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_GT(nans, 0u);
  std::printf("[ measured ] convert fp32 -> bf16: %zu values, %zu bitwise mismatches (bound 0)\n",
              n, mismatches);
}

// Widening every bf16 bit pattern, NaNs included, is a shift: bitwise the CPU's.
TEST_F(CudaVectorOps, ConvertToFp32MatchesCpuBitwise) {
  const std::size_t n = 0x10000;
  std::vector<plait::bf16> src(n);
  for (std::size_t b = 0; b < n; ++b) {
    src[b] = plait::bf16::from_bits(static_cast<std::uint16_t>(b));
  }
  std::vector<float> cpu(n);
  kernels::convert(cpu.data(), src.data(), n);
  DeviceBuffer<bf16> gsrc(n);
  DeviceBuffer<float> gdst(n);
  upload_bits(gsrc.get(), src);
  gdst.poison();
  convert(gdst.get(), gsrc.get(), n, ctx());
  sync();
  const auto gpu = bits_of<std::uint32_t>(gdst.get(), n);
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < n; ++i) {
    mismatches += gpu[i] != std::bit_cast<std::uint32_t>(cpu[i]);
  }
  EXPECT_EQ(mismatches, 0u);
  std::printf("[ measured ] convert bf16 -> fp32: %zu values, %zu bitwise mismatches (bound 0)\n",
              n, mismatches);
}

TEST_F(CudaVectorOps, NormalInitMatchesCpuBitwise) {
  const std::size_t n = 1031;
  const std::uint64_t key = 0x1234'5678'9ABC'DEF0ull;
  std::vector<float> cpu(n);
  kernels::normal_init(cpu.data(), n, 0.02, key);
  DeviceBuffer<float> d(n);
  d.poison();
  normal_init(d.get(), n, 0.02, key, ctx());
  sync();
  expect_close("normal_init", d.download(), as_double(cpu), 0.0);
}

}  // namespace
}  // namespace plait::kernels::cuda
