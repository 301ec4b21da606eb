#pragma once
// Which tile products the bf16 attention kernel (kernels/attention.h) multiplies with, decided
// once per process:
//   dpbf16        AVX-512 BF16's vdpbf16ps on bf16 tiles (kernels/tile_product_bf16.h): the
//                 score products read q, K, V and dout as bf16 pairs, P and dS are rounded to
//                 bf16 before their products (as FlashAttention-2 does on GPUs), fp32 sums;
//   widened-fp32  every bf16 tile widened to fp32 (exact) and fp32 products
//                 (kernels/tile_product.h), as the fp32 kernel.
// dpbf16 needs both a compiler that targets AVX-512 BF16 (the build's -march=native, PLAIT_NATIVE,
// on such a CPU) and a CPU that has it at run time (a binary copied to an older CPU never executes
// the instruction). PLAIT_BF16_ATTENTION=widened in the environment forces the widened path (the
// tests run both on one machine that way, as ONEDNN_MAX_CPU_ISA does for the GEMMs);
// PLAIT_BF16_ATTENTION=auto, or unset, takes dpbf16 where it can run. Read at first use.
#include <string>
#include <string_view>

namespace plait::kernels {

enum class AttentionBf16Path { kDpBf16, kWidenedFp32 };
std::string_view name_of(AttentionBf16Path path);  // "dpbf16" | "widened-fp32"

// Compiled in and supported by this CPU (whatever the environment says).
bool attention_dpbf16_available();

// The path the bf16 attention takes in this process. Throws plait::Error naming the variable
// when PLAIT_BF16_ATTENTION holds anything but "auto" or "widened".
AttentionBf16Path attention_bf16_path();

// "attention dpbf16 (vdpbf16ps)" or "attention widened-fp32 (why)": the benchmark's words.
std::string describe_attention_bf16_path();

}  // namespace plait::kernels
