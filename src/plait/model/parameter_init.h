#pragma once
// Initial parameter values. Each tensor's rule is part of its layout entry (parameter_layout.cpp:
// GPT-2's and LLaMA's initialisations, with their sources); the values depend only on (seed,
// tensor name, element index): each element is drawn from a counter-based generator keyed by
// hash(seed, name), so a tensor gets the same values whatever stage or layout holds it (and the
// two copies of a tied embedding start equal).
#include <cstdint>
#include <span>

#include "plait/kernels/backend.h"
#include "plait/model/parameter_layout.h"

namespace plait::model {

// Fills `values` (tensor.numel floats of the backend's memory) with the tensor's initial values.
void init_tensor(std::span<float> values, const NamedTensor& tensor, std::uint64_t seed,
                 kernels::Backend& backend);

}  // namespace plait::model
