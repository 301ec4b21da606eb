#pragma once
// Between a whole tensor and one tensor-parallel rank's part of it (NamedTensor::shard,
// spec::tensor_shard), in host memory: how initialisation (the whole tensor's draw, so every
// degree starts from the single process's values) and checkpoints (whole tensors by global name,
// so a run resumes at any degree) meet the parts.
#include <span>

#include "plait/model/parameter_layout.h"

namespace plait::model {

// part (t.numel) = the rank's part of whole (t.full_numel(), row-major t.full_shape); rows of a
// vocabulary part past the whole table (the padding to a multiple of 128 t) are zero.
void copy_shard_out(std::span<const float> whole, const NamedTensor& t, std::span<float> part);

// The rank's part written into whole (the padding rows dropped).
void copy_shard_in(std::span<float> whole, const NamedTensor& t, std::span<const float> part);

}  // namespace plait::model
