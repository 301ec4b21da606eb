#pragma once
// The files `plait profile` writes (docs/runtime.md, "Profiles"):
//   - a latency table in Zorse's model_latencies.json shape (sim/latency_table.h), one model,
//     one device type, per sequence length: dtype "float32" (or "float16" for a profile measured
//     in bf16 mixed precision, `plait profile --precision bf16`) holds ONE TRANSFORMER LAYER (fits
//     and samples at micro-batch 1..N, ms), as Zorse's entries do; the embedding and the head
//     (final LayerNorm + LM head + cross-entropy), which Zorse's table has no place for, sit
//     beside it under the dtypes "float32+embedding" and "float32+head" in the same shape, so
//     any reader of the table that looks up "float32" is unaffected;
//   - a segment profile: per sequence segment of the config's partition, the measured F, B and
//     W milliseconds of one layer, the embedding and the head (attention grows with the
//     segment's prefix, so each segment is measured, not scaled):
//       {"model": {...}, "microbatch_size": b, "threads": t,
//        "segments": [{"start": 0, "length": 64}, ...],
//        "layer": [{"forward_ms": .., "backward_input_ms": .., "backward_weight_ms": ..}, ...],
//        "embedding": [...], "head": [...]}
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plait/runtime/unit_profiler.h"
#include "plait/sim/latency_table.h"

namespace plait::runtime {

// "plait_l4_h128_a4_v256": the table's model key for a config's model.
std::string profile_model_name(const spec::ModelSpec& model);

// The table's dtype key of a precision: "float32", or for bf16 mixed precision "float16", the key
// Zorse's tables file 16-bit mixed precision under and the planner reads for a cluster spec of
// precision "mixed16" (plan/device_profiles.cpp).
std::string latency_dtype(spec::Precision precision);

// The latency-table entries of one measured sequence length, measured in `precision`.
std::vector<sim::LatencyEntry> latency_entries(const BatchProfile& profile, const std::string& model,
                                               const std::string& device,
                                               spec::Precision precision = spec::Precision::fp32);

nlohmann::json to_json(const SegmentProfile& profile, int threads);
// Reads a segment profile strictly (InputErrors name the file and field).
SegmentProfile read_segment_profile(const std::string& path);

}  // namespace plait::runtime
