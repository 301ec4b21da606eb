#pragma once
// Device profiles from Zorse's measured per-layer latencies (share/profiles/zorse/, MIT, from
// benson-guo/zorse): model -> GPU -> sequence length -> dtype -> [[f_slope, f_intercept],
// [b_slope, b_intercept], forward ms for micro-batch 1..16, backward ms for 1..16].
//
// For a simulated model, plait reads the table of that model (a preset names its table; a
// model of the same family and hidden size otherwise; else the user names one: never a silent
// substitute, latency_table.h) and scales its fitted per-layer latency by FLOPs: a unit of work
// costs slope * (its layer FLOPs / the measured layer's FLOPs per sample) + intercept per layer,
// so short segments still pay the per-layer overhead the intercept holds.
#include <string>
#include <vector>

#include "plait/spec/model_spec.h"
#include "plait/sim/device_profile.h"
#include "plait/sim/latency_table.h"

namespace plait::sim {

std::vector<std::string> zorse_gpu_types();
std::string zorse_gpu_list();  // "a100x40, a100x80, ..."
// Datasheet memory of a GPU type Zorse measured, bytes (0 if unknown).
double zorse_memory_bytes(const std::string& gpu);

// The shipped table and Zorse's model statistics (model_stats.json), read once.
const LatencyTable& zorse_table();
const nlohmann::json& zorse_model_stats();

// The profile of `gpu` for `model`, reading the preferred measured model at the preferred
// sequence length (latency_table.h's rules): the planner asks for deepspeedllama_7b at the
// planned sequence for its llama-7b preset. Throws plait::Error if the GPU or dtype has no
// usable measurement.
DeviceProfile zorse_device_profile(const std::string& gpu, const std::string& dtype,
                                   const spec::ModelSpec& model,
                                   const LatencyPreference& preference = {});

}  // namespace plait::sim
