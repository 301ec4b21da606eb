#pragma once
// The text form of a schedule: one line per rank, actions separated by spaces:
//
//     F0.0 F1.0 B0.0 F2.0 B1.0 B2.0
//     F0.0 B0.0 F1.0 B1.0 F2.0 B2.0
//
// Actions carry "c<chunk>" when some rank holds more than one chunk ("F0.1c1"). Directive lines,
// written only when the defaults would not reproduce the schedule exactly:
//     microbatches <m>        (default: largest micro-batch + 1)
//     segments <k>            (default: largest segment + 1)
//     layout <r0> <r1> ...    (each rank's virtual stages, comma-separated, e.g. "0,7 1,6";
//                              default: interleaved, chunk c of rank r at c*p + r)
// "-" stands for a rank without actions; '#' starts a comment; blank lines are ignored.
// parse_schedule(format_schedule(s)) == s for every schedule.
#include <string>
#include <string_view>

#include "plait/schedule/schedule.h"

namespace plait::schedule {

std::string format_schedule(const Schedule& schedule);

// `source` names the text in errors ("<source>: line L, column C: <problem>"). Throws
// plait::InputError for malformed text; it does not validate the schedule (see validate()).
Schedule parse_schedule(std::string_view text, const std::string& source);

// Reads and parses a schedule file.
Schedule read_schedule_file(const std::string& path);

}  // namespace plait::schedule
