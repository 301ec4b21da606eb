#pragma once
// What the CUDA kernels' tests share: the fixture that skips without a device, device buffers
// filled from and read back into double vectors, bf16 rounding of inputs, and the tolerances.
//
// The same test sources build twice (CMakeLists.txt here): against the CUDA runtime, where they
// run on a GPU and skip with "no CUDA device: <why>" when there is none, and against the CPU
// emulation of src/plait/kernels/cuda/emulation/, where they always run.
//
// Tolerances, in the kernels tests' scaled metric max|gpu - ref| / max|ref|
// (tests/kernels/finite_difference.h):
//   fp32 mode: the GPU kernel against the CPU fp32 kernel on the same inputs, within 1e-5
//     (both round each operation to fp32, u = 6e-8; sums of up to a few thousand terms reorder).
//   bf16 mode: the GPU kernel against the CPU kernel in fp64 on the same bf16-rounded inputs, so
//     only the GPU's own roundings count. bf16 keeps 8 significant bits: each rounding of a value
//     to bf16 (round to nearest even) errs by at most u = 2^-8 = 3.9e-3 of it, hence at most u in
//     the scaled metric. The arithmetic in between is fp32 (u = 6e-8, negligible beside 2^-8).
//     A result that is rounded to bf16 r times on its way (stated per test) is allowed
//     bf16_bound(r) = 1.25 r 2^-8: r roundings, plus a quarter for the fp32 work and second-order
//     terms. Results kept in fp32 (statistics, weight gradients, master weights, losses) are
//     held to the fp32 bound even in bf16 mode, since their inputs are the same rounded values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/finite_difference.h"
#include "plait/kernels/cuda/context.h"
#include "plait/kernels/cuda/cuda_api.h"
#include "plait/kernels/cuda/cuda_check.h"

namespace plait::kernels::cuda::testing {

using plait::kernels::testing::random_vector;
using plait::kernels::testing::scaled_max_error;

inline constexpr double kFp32Bound = 1e-5;
inline double bf16_bound(int roundings) { return 1.25 * roundings * std::ldexp(1.0, -8); }

// The bound for a result rounded to T `roundings` times (fp32: kFp32Bound).
template <typename T>
double bound_for(int roundings) {
  if constexpr (std::is_same_v<T, float>) {
    return kFp32Bound;
  } else {
    return bf16_bound(roundings);
  }
}

// The CPU reference's type: the engine's fp32 kernel in fp32 mode, fp64 in bf16 mode.
template <typename T>
using Reference = std::conditional_t<std::is_same_v<T, float>, float, double>;

inline const char* type_name(float) { return "fp32"; }
inline const char* type_name(bf16) { return "bf16"; }

// x rounded to T and back (the value a T buffer holds).
template <typename T>
double stored(double x) {
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<double>(static_cast<float>(x));
  } else {
    return static_cast<double>(__bfloat162float(__float2bfloat16(static_cast<float>(x))));
  }
}

// The values v takes in a T buffer.
template <typename T>
std::vector<double> stored(const std::vector<double>& v) {
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = stored<T>(v[i]);
  return r;
}

template <typename R>
std::vector<R> as(const std::vector<double>& v) {
  return std::vector<R>(v.begin(), v.end());
}
template <typename R>
std::vector<double> as_double(const std::vector<R>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// A device allocation of n elements of T (freed on destruction), written from and read into
// doubles through the conversions the kernels use.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t n) : n_(n) {
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&data_), (n > 0 ? n : 1) * sizeof(T)),
               "test: cudaMalloc");
  }
  explicit DeviceBuffer(const std::vector<double>& values) : DeviceBuffer(values.size()) {
    upload(values);
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  std::size_t size() const { return n_; }

  void upload(const std::vector<double>& values) {
    std::vector<T> host(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) host[i] = convert(values[i]);
    check_cuda(cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
               "test: upload");
  }
  // Every byte 0xFF: NaN in fp32 and bf16, so an element the kernel should write but does not
  // shows up as NaN (METHOD.md: poison outputs).
  void poison() { check_cuda(cudaMemset(data_, 0xFF, n_ * sizeof(T)), "test: poison"); }
  std::vector<double> download() const {
    std::vector<T> host(n_);
    check_cuda(cudaMemcpy(host.data(), data_, n_ * sizeof(T), cudaMemcpyDeviceToHost),
               "test: download");
    std::vector<double> r(n_);
    for (std::size_t i = 0; i < n_; ++i) r[i] = back(host[i]);
    return r;
  }

 private:
  static T convert(double x) {
    if constexpr (std::is_same_v<T, bf16>) {
      return __float2bfloat16(static_cast<float>(x));
    } else {
      return static_cast<T>(x);
    }
  }
  static double back(T x) {
    if constexpr (std::is_same_v<T, bf16>) {
      return static_cast<double>(__bfloat162float(x));
    } else {
      return static_cast<double>(x);
    }
  }

  T* data_ = nullptr;
  std::size_t n_ = 0;
};

inline bool all_finite(const std::vector<double>& v) {
  for (double x : v) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

// Expects gpu to match ref within bound, every element written (finite), and prints the
// measured error (scripts/gpu-check.sh collects these lines into its summary).
inline void expect_close(const std::string& what, const std::vector<double>& gpu,
                         const std::vector<double>& ref, double bound) {
  ASSERT_EQ(gpu.size(), ref.size()) << what;
  EXPECT_TRUE(all_finite(gpu)) << what << ": an element is NaN or infinite (unwritten?)";
  const double err = scaled_max_error(gpu, ref);
  std::printf("[ measured ] %s: scaled error %.3g (bound %.3g)\n", what.c_str(), err, bound);
  EXPECT_LE(err, bound) << what;
}

// The fixture of every CUDA kernel test: a Context on device 0, or a skip naming why there is no
// device.
class CudaKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = cuda_unavailable_reason();
    if (!why.empty()) GTEST_SKIP() << "no CUDA device: " << why;
    ctx_ = std::make_unique<Context>();
  }
  const Context& ctx() const { return *ctx_; }
  void sync() const { ctx_->synchronize(); }

 private:
  std::unique_ptr<Context> ctx_;
};

}  // namespace plait::kernels::cuda::testing
