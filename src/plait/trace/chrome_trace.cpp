#include "plait/trace/chrome_trace.h"

#include <cstdio>
#include <sstream>

#include "plait/core/atomic_file.h"
#include "plait/core/error.h"
#include "plait/trace/json_text.h"

namespace plait::trace {

namespace {

void metadata(std::ostream& out, const char* name, int pid, int tid, const std::string& value,
              bool& first) {
  out << (first ? "\n" : ",\n") << R"({"name":")" << name << R"(","ph":"M","pid":)" << pid
      << R"(,"tid":)" << tid << R"(,"args":{"name":)" << json_string(value) << "}}";
  first = false;
}

}  // namespace

void write_chrome_trace(const Timeline& timeline, std::ostream& out) {
  const bool with_chunk = timeline.max_chunks > 1;
  out << R"({"displayTimeUnit":"ms","otherData":{"title":)" << json_string(timeline.title);
  for (const auto& [key, value] : timeline.summary) out << "," << json_string(key) << ":" << json_string(value);
  out << R"(},"traceEvents":[)";
  bool first = true;
  metadata(out, "process_name", 0, 0, "compute", first);
  metadata(out, "process_name", 1, 0, "sends", first);
  for (int r = 0; r < timeline.num_ranks; ++r) {
    metadata(out, "thread_name", 0, r, timeline.rank_label(r), first);
    metadata(out, "thread_name", 1, r, timeline.rank_label(r), first);
  }
  char buf[320];
  for (const Event& e : timeline.events) {
    const double ts = e.start * 1e6, dur = (e.end - e.start) * 1e6;
    int n;
    if (is_compute(e.kind)) {
      char chunk[16] = "";
      if (with_chunk) std::snprintf(chunk, sizeof chunk, "c%d", e.chunk);
      n = std::snprintf(buf, sizeof buf,
                        R"(,%s{"name":"%s%d.%d%s","cat":"%s","ph":"X","ts":%.3f,"dur":%.3f,"pid":0,"tid":%d,"args":{"microbatch":%d,"segment":%d,"chunk":%d}})",
                        "\n", event_kind_name(e.kind), e.microbatch, e.segment, chunk,
                        event_kind_name(e.kind), ts, dur, e.rank, e.microbatch, e.segment, e.chunk);
    } else {
      n = std::snprintf(buf, sizeof buf,
                        R"(,%s{"name":"%s %d.%d to %d","cat":"send","ph":"X","ts":%.3f,"dur":%.3f,"pid":1,"tid":%d,"args":{"to":%d,"bytes":%lld,"microbatch":%d,"segment":%d}})",
                        "\n", e.gradient ? "grad" : "act", e.microbatch, e.segment, e.peer, ts,
                        dur, e.rank, e.peer, static_cast<long long>(e.bytes), e.microbatch,
                        e.segment);
    }
    out.write(buf, n);
  }
  out << "\n]}\n";
}

void write_chrome_trace_file(const Timeline& timeline, const std::string& path) {
  std::ostringstream out;
  write_chrome_trace(timeline, out);
  write_file_atomically(path, out.str());  // a unique temporary, renamed: never through a link
}

}  // namespace plait::trace
