#include "plait/schedule/schedule_family.h"

#include "plait/core/error.h"
#include "plait/schedule/generators.h"

namespace plait::schedule {

const std::vector<ScheduleFamily>& schedule_families() {
  static const std::vector<ScheduleFamily> families = {
      gpipe_family(),   one_f_one_b_family(),         interleaved_family(), seq1f1b_family(),
      seq1f1b_interleaved_family(), zb_h1_family(), zb_v_family(),        seq1f1b_zb_family(),
      looped_bfs_family(), interleaved_zb_family(), dualpipe_v_family(), v_min_family(),
      v_half_family(), v_zb_family(),
  };
  return families;
}

const ScheduleFamily* find_schedule_family(std::string_view name) {
  for (const ScheduleFamily& f : schedule_families()) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

const ScheduleFamily& schedule_family(std::string_view name) {
  const ScheduleFamily* family = find_schedule_family(name);
  if (!family) {
    throw Error("unknown schedule '" + std::string(name) + "'; expected one of " + schedule_family_names());
  }
  return *family;
}

std::string schedule_family_names() {
  std::string names;
  for (const ScheduleFamily& f : schedule_families()) {
    if (!names.empty()) names += ", ";
    names += f.name;
  }
  return names;
}

std::string unsupported_reason(const ScheduleFamily& family, const PipelineShape& shape) {
  const std::string who = family.name + ": ";
  if (shape.stages < 1) return who + "expected at least 1 pipeline stage, got " + std::to_string(shape.stages);
  if (shape.microbatches < 1) {
    return who + "expected at least 1 micro-batch, got " + std::to_string(shape.microbatches);
  }
  if (shape.segments < 1) return who + "expected at least 1 segment, got " + std::to_string(shape.segments);
  if (!family.sequence_level && shape.segments != 1) {
    std::string sequence_level;
    for (const ScheduleFamily& f : schedule_families()) {
      if (f.sequence_level) sequence_level += (sequence_level.empty() ? "" : ", ") + f.name;
    }
    return who + "schedules whole micro-batches, so segments must be 1 (got " +
           std::to_string(shape.segments) + "); the sequence-level families are " + sequence_level;
  }
  if (family.fixed_chunks > 0 && shape.chunks != family.fixed_chunks) {
    return who + "uses exactly " + std::to_string(family.fixed_chunks) + " chunk(s) per rank (got " +
           std::to_string(shape.chunks) + ")";
  }
  if (family.fixed_chunks == 0 && shape.chunks < 2) {
    return who + "interleaves v >= 2 chunks per rank (got " + std::to_string(shape.chunks) +
           "); with one chunk use " +
           (family.forwards_first ? "gpipe" : family.sequence_level ? "seq1f1b" : "1f1b");
  }
  if (family.unsupported) {
    std::string reason = family.unsupported(shape);
    if (!reason.empty()) return who + reason;
  }
  return {};
}

Schedule generate_schedule(const ScheduleFamily& family, const PipelineShape& shape) {
  if (std::string reason = unsupported_reason(family, shape); !reason.empty()) throw Error(reason);
  return family.generate(shape);
}

Schedule generate_schedule(std::string_view name, const PipelineShape& shape) {
  return generate_schedule(schedule_family(name), shape);
}

}  // namespace plait::schedule
