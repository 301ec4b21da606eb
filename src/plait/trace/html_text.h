#pragma once
// Pieces shared by the HTML pages plait writes (html_timeline.h, html_report.h): text escaped for
// HTML and SVG, and "nice" axis ticks.
#include <string>

namespace plait::trace {

// & < > " as entities.
std::string escape_html(const std::string& text);

// A tick step of 1, 2 or 5 times a power of ten giving about `target` ticks over `span` (> 0).
double nice_tick_step(double span, int target);

}  // namespace plait::trace
