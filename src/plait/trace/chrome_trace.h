#pragma once
// Chrome trace event format (the JSON "traceEvents" array of complete "X" events; documented in
// Google's "Trace Event Format" and opened by Perfetto and chrome://tracing). Process 0 holds one
// thread per rank with its compute events; process 1 holds one thread per rank with its sends.
#include <ostream>
#include <string>

#include "plait/trace/event.h"

namespace plait::trace {

void write_chrome_trace(const Timeline& timeline, std::ostream& out);
// Throws plait::Error if the file cannot be written.
void write_chrome_trace_file(const Timeline& timeline, const std::string& path);

}  // namespace plait::trace
