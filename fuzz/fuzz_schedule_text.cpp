// Fuzzes the text form of schedules (schedule::parse_schedule: action lists, "c<chunk>",
// directives microbatches / segments / layout, comments). A schedule it accepts must format and
// parse back to itself (the documented round trip), and, when small, go through the validator
// (every rule, incl. the lowering and the deadlock check) without anything but a verdict.
// Anything but a plait::Error is a finding.
#include <cstdint>
#include <string_view>

#include "plait/core/error.h"
#include "plait/schedule/schedule_text.h"
#include "plait/schedule/validator.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace plait::schedule;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Schedule s;
  try {
    s = parse_schedule(text, "fuzz.schedule");
  } catch (const plait::Error&) {
    return 0;
  }
  try {
    if (parse_schedule(format_schedule(s), "formatted") != s) __builtin_trap();
  } catch (const plait::Error&) {
    __builtin_trap();  // the formatter wrote what the parser refuses
  }
  if (s.num_actions() > 4096 || s.num_ranks() > 64 || s.layout.num_microbatches > 4096 ||
      s.layout.num_segments > 64 || s.layout.num_vstages > 256) {
    return 0;
  }
  try {
    if (const auto v = validate(s)) (void)summary(s, *v);
  } catch (const plait::Error&) {
  }
  return 0;
}
