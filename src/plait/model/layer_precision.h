#pragma once
// What a layer does differently by activation type T (spec/precision_policy.h), in one place
// for both families' blocks.
#include <cstddef>

#include "plait/core/memory_category.h"
#include "plait/kernels/backend.h"
#include "plait/model/block.h"
#include "plait/model/tensor_pool.h"

namespace plait::model {

// The unit's completed dK/dV as the K/V projection's B and W GEMMs take it, called once this
// unit's attention backward has added its share (nothing adds to it afterwards). fp32: the
// accumulator itself. bf16: the accumulator rounded into st.dkv_kept, which the unit keeps to its
// W, and the fp32 accumulator freed.
template <typename T>
T* complete_dkv(LayerState& st, TensorPool& pool, kernels::Backend& backend) {
  if constexpr (std::is_same_v<T, float>) {
    return st.dkv.data();
  } else {
    st.dkv_kept = pool.acquire_as<T>(MemoryCategory::kKVCache, st.dkv.size());
    backend.convert(st.dkv_kept.as<T>(), st.dkv.data(), st.dkv.size());
    st.dkv.reset();
    return st.dkv_kept.as<T>();
  }
}

// The completed dK/dV in W (after complete_dkv ran in B).
template <typename T>
const T* completed_dkv(const LayerState& st) {
  if constexpr (std::is_same_v<T, float>) {
    return st.dkv.data();
  } else {
    return st.dkv_kept.as<T>();
  }
}

}  // namespace plait::model
