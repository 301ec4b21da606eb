#pragma once
// A self-contained HTML page with an SVG timeline: one row per rank, time to the right; F, B, W
// and BW boxes in their own colours, later sequence segments in lighter shades, chunks > 0
// marked with a dark band, idle time as the grey row background, sends as thin bars under the
// row, a legend, a time axis, the per-rank busy share, and a hover title on every box.
// Timelines with more than `max_boxes` compute events are drawn aggregated: each pixel column of
// a row shows the kind that kept the rank busiest there, shaded by how busy it was, so the page
// stays small and quick for p = 64, m = 1024, k = 8.
#include <cstddef>
#include <ostream>
#include <string>

#include "plait/trace/event.h"

namespace plait::trace {

struct HtmlOptions {
  int plot_width = 1400;            // pixels for the time axis
  std::size_t max_boxes = 20000;    // above this, aggregate per pixel column
};

void write_html_timeline(const Timeline& timeline, std::ostream& out, const HtmlOptions& options = {});
// Throws plait::Error if the file cannot be written.
void write_html_timeline_file(const Timeline& timeline, const std::string& path,
                              const HtmlOptions& options = {});

}  // namespace plait::trace
