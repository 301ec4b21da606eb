#pragma once
// The reduction data parallelism runs on bf16 gradients (train.grad_reduce "bf16";
// spec/precision_policy.h): MPI has no bfloat16 type before MPI 4.1, so the words travel as
// 16-bit integers and this is the user-defined operation (MPI-3.1 sec. 5.9.5) that combines
// them. Each pair is widened to fp32 (exact), added in fp32 and the partial sum rounded to bf16
// to nearest even — Megatron-LM's bf16 grad reduce (NCCL's bf16 sum does the same per step).
//
// Error: a partial sum of two bf16 values is exact in fp32 unless their exponents differ by more
// than 16 (then it is off by at most 2^-24 relative), and its rounding to bf16 adds at most
// u |s| with u = 2^-8 (bf16's unit roundoff: 8 significant bits). Summing n values in any order
// through this op is therefore within sum over the n - 1 partial sums s_k of (u + 2^-24) |s_k| of
// the exact sum of the inputs (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed.,
// sec. 4.2, for recursive summation with one rounding per addition).
//
// Commutative bitwise: x + y == y + x in IEEE fp32 and the rounding is a function of the sum, so
// MPI may combine in any order of operands; every algorithm OpenMPI uses for an all-reduce
// (ring, recursive doubling, reduce + broadcast) either computes each partial sum once and
// copies it or computes it on both partners from the same two operands, so every rank ends with
// the same bytes (tests/comm/collective_test.cpp checks it).
#include <cstddef>
#include <span>

#include "plait/core/bf16.h"

namespace plait::comm {

// inout[i] = bf16(float(in[i]) + float(inout[i])), for i < inout.size() (== in.size()).
void bf16_sum_into(std::span<const bf16> in, std::span<bf16> inout);

}  // namespace plait::comm
