#include "plait/kernels/attention_path.h"

#include <cstdlib>

#include "plait/core/error.h"
#include "plait/kernels/tile_product_bf16.h"

namespace plait::kernels {
namespace {

constexpr const char* kVariable = "PLAIT_BF16_ATTENTION";

bool compiled_in() {
#if defined(PLAIT_TILE_DPBF16)
  return true;
#else
  return false;
#endif
}

// True when the environment forces the widened path.
bool forced_widened() {
  const char* value = std::getenv(kVariable);
  if (value == nullptr || std::string_view(value) == "auto" || *value == '\0') return false;
  if (std::string_view(value) == "widened") return true;
  throw Error(std::string(kVariable) + ": expected \"auto\" or \"widened\", found \"" + value + "\"");
}

}  // namespace

std::string_view name_of(AttentionBf16Path path) {
  return path == AttentionBf16Path::kDpBf16 ? "dpbf16" : "widened-fp32";
}

bool attention_dpbf16_available() {
#if defined(PLAIT_TILE_DPBF16)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

AttentionBf16Path attention_bf16_path() {
  static const AttentionBf16Path path = attention_dpbf16_available() && !forced_widened()
                                            ? AttentionBf16Path::kDpBf16
                                            : AttentionBf16Path::kWidenedFp32;
  return path;
}

std::string describe_attention_bf16_path() {
  const AttentionBf16Path path = attention_bf16_path();
  std::string why;
  if (path == AttentionBf16Path::kDpBf16) {
    why = "vdpbf16ps";
  } else if (!compiled_in()) {
    why = "not compiled for AVX-512 BF16";
  } else if (!attention_dpbf16_available()) {
    why = "the CPU has no AVX-512 BF16";
  } else {
    why = std::string(kVariable) + "=widened";
  }
  return "attention " + std::string(name_of(path)) + " (" + why + ")";
}

}  // namespace plait::kernels
