#include "plait/trace/html_timeline.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "plait/core/atomic_file.h"
#include "plait/core/error.h"
#include "plait/trace/html_text.h"

namespace plait::trace {

namespace {

// Base colours per compute kind (F, B, W, BW): a colour-blind-safe set (Tableau 10).
constexpr std::array<std::array<int, 3>, 4> kBase = {{
    {76, 120, 168},   // F  blue
    {245, 133, 24},   // B  orange
    {84, 162, 75},    // W  green
    {228, 87, 86},    // BW red
}};

std::string shade(EventKind kind, int segment, int segments) {
  const auto& c = kBase[static_cast<int>(kind)];
  // Segment 0 in the full colour, the last segment mixed halfway with white.
  const double t = segments > 1 ? 0.5 * segment / (segments - 1) : 0.0;
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", static_cast<int>(c[0] + (255 - c[0]) * t),
                static_cast<int>(c[1] + (255 - c[1]) * t), static_cast<int>(c[2] + (255 - c[2]) * t));
  return buf;
}

// Time in a readable unit.
std::string format_time(double seconds) {
  char buf[32];
  const double a = std::fabs(seconds);
  if (a >= 1.0) std::snprintf(buf, sizeof buf, "%.3f s", seconds);
  else if (a >= 1e-3) std::snprintf(buf, sizeof buf, "%.3f ms", seconds * 1e3);
  else std::snprintf(buf, sizeof buf, "%.1f us", seconds * 1e6);
  return buf;
}

struct Geometry {
  double left = 190.0;   // room for rank labels
  double top = 28.0;     // room for the axis labels
  double row = 22.0;
  double gap = 4.0;
  double width = 1400.0;
  double end = 1.0;
  double x(double t) const { return left + t / end * width; }
  double y(int rank) const { return top + rank * (row + gap); }
};

// Ticks in one unit for the whole axis (s, ms or us), with as many decimals as the step needs.
void write_axis(std::ostream& out, const Geometry& g, int ranks) {
  const double step = nice_tick_step(g.end, 10);
  const double scale = g.end >= 1.0 ? 1.0 : g.end >= 1e-3 ? 1e3 : 1e6;
  const char* unit = g.end >= 1.0 ? "s" : g.end >= 1e-3 ? "ms" : "us";
  const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step * scale) + 1e-9)));
  const double bottom = g.y(ranks);
  const int ticks = static_cast<int>(std::floor(g.end / step + 1e-9));
  for (int i = 0; i <= ticks; ++i) {
    const double x = g.x(i * step);
    char label[48];
    std::snprintf(label, sizeof label, "%.*f %s", decimals, i * step * scale, unit);
    out << "<line class=\"tick\" x1=\"" << x << "\" y1=\"" << g.top - 6 << "\" x2=\"" << x
        << "\" y2=\"" << bottom << "\"/>";
    out << "<text class=\"axis\" x=\"" << x << "\" y=\"" << g.top - 10 << "\">" << label
        << "</text>\n";
  }
}

void write_boxes(std::ostream& out, const Timeline& tl, const Geometry& g) {
  const bool with_chunk = tl.max_chunks > 1;
  char buf[512];
  for (const Event& e : tl.events) {
    const double x0 = g.x(e.start), x1 = g.x(e.end);
    const double w = std::max(x1 - x0, 0.5);
    const double y = g.y(e.rank);
    if (!is_compute(e.kind)) {
      std::snprintf(buf, sizeof buf,
                    "<rect class=\"send\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"3\"><title>"
                    "rank %d sends the %s of %d.%d to rank %d: %lld bytes, %s to %s</title></rect>\n",
                    x0, y + g.row - 3, w, e.rank, e.gradient ? "gradient" : "activation",
                    e.microbatch, e.segment, e.peer, static_cast<long long>(e.bytes),
                    format_time(e.start).c_str(), format_time(e.end).c_str());
      out << buf;
      continue;
    }
    char name[48];
    if (with_chunk) {
      std::snprintf(name, sizeof name, "%s%d.%dc%d", event_kind_name(e.kind), e.microbatch, e.segment, e.chunk);
    } else {
      std::snprintf(name, sizeof name, "%s%d.%d", event_kind_name(e.kind), e.microbatch, e.segment);
    }
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"><title>"
                  "%s: %s (micro-batch %d, segment %d, chunk %d) %s to %s, %s</title></rect>",
                  x0, y, w, g.row - 4, shade(e.kind, e.segment, tl.num_segments).c_str(),
                  escape_html(tl.rank_label(e.rank)).c_str(), name, e.microbatch, e.segment, e.chunk,
                  format_time(e.start).c_str(), format_time(e.end).c_str(),
                  format_time(e.end - e.start).c_str());
    out << buf;
    if (with_chunk && e.chunk > 0) {
      std::snprintf(buf, sizeof buf, "<rect class=\"chunk\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"3\"/>",
                    x0, y, w);
      out << buf;
    }
    // A label when the box is wide enough to hold it.
    const double label_width = 6.5 * static_cast<double>(std::string(name).size() - 1);
    if (w > label_width + 4 && g.row >= 14) {
      std::snprintf(buf, sizeof buf, "<text class=\"label\" x=\"%.2f\" y=\"%.2f\">%s</text>",
                    x0 + w / 2, y + (g.row - 4) / 2 + 4, name + (e.kind == EventKind::BW ? 2 : 1));
      out << buf;
    }
    out << '\n';
  }
}

// Per bin of 4 pixel columns of each row: the share of the bin each kind kept the rank busy,
// and the idle rest, drawn as a stack from the bottom of the row (busy kinds, then idle in its
// own hatched fill, distinct from the row's background: a row 68% busy must not look like one
// 99% busy). Shares are quantised to eighths of the row by largest remainder, so the stack
// always fills the row and shows each share within an eighth. A run of neighbouring bins is
// drawn as one rect per kind while each bin stays within an eighth of the run's mix and the
// run's mean mix stays the same: steady phases become a few rects (the page stays small), while
// a bubble (idle jumping) starts a new run.
constexpr int kBinPixels = 4;
constexpr int kLevels = 8;
constexpr int kIdle = 4;  // index of the idle share after F, B, W, BW

// The mix of busy seconds `busy` over `span` seconds, in eighths that sum to kLevels.
std::array<int, 5> quantised_levels(const std::array<double, 4>& busy, double span) {
  std::array<double, 5> share{};
  double total = 0;
  for (int k = 0; k < 4; ++k) total += share[k] = std::min(busy[k] / span, 1.0);
  if (total > 1) {
    for (int k = 0; k < 4; ++k) share[k] /= total;
  }
  share[kIdle] = std::max(0.0, 1.0 - total);
  std::array<int, 5> q{};
  std::array<double, 5> rest{};
  int given = 0;
  for (int k = 0; k < 5; ++k) {
    q[k] = static_cast<int>(std::floor(share[k] * kLevels));
    rest[k] = share[k] * kLevels - q[k];
    given += q[k];
  }
  while (given < kLevels) {  // largest remainder first; ties to the earlier kind
    const int k = static_cast<int>(std::max_element(rest.begin(), rest.end()) - rest.begin());
    ++q[k];
    rest[k] = -1;
    ++given;
  }
  return q;
}

void write_aggregated(std::ostream& out, const Timeline& tl, const Geometry& g) {
  const int columns = static_cast<int>(g.width) / kBinPixels;
  const double col_time = g.end / columns;
  std::vector<std::array<double, 4>> busy(static_cast<std::size_t>(tl.num_ranks) * columns);
  for (const Event& e : tl.events) {
    if (!is_compute(e.kind) || e.rank < 0 || e.rank >= tl.num_ranks) continue;
    const int c0 = std::clamp(static_cast<int>(e.start / col_time), 0, columns - 1);
    const int c1 = std::clamp(static_cast<int>(e.end / col_time), 0, columns - 1);
    for (int c = c0; c <= c1; ++c) {
      const double lo = std::max(e.start, c * col_time), hi = std::min(e.end, (c + 1) * col_time);
      if (hi > lo) busy[static_cast<std::size_t>(e.rank) * columns + c][static_cast<int>(e.kind)] += hi - lo;
    }
  }
  const double height = g.row - 4;
  char buf[512];
  for (int r = 0; r < tl.num_ranks; ++r) {
    const auto bin = [&](int c) -> const std::array<double, 4>& { return busy[static_cast<std::size_t>(r) * columns + c]; };
    int c = 0;
    while (c < columns) {
      std::array<double, 4> sum = bin(c);
      const std::array<int, 5> q = quantised_levels(sum, col_time);
      int c_end = c + 1;
      for (; c_end < columns; ++c_end) {
        const std::array<int, 5> next = quantised_levels(bin(c_end), col_time);
        bool near = true;
        for (int k = 0; k < 5; ++k) near = near && std::abs(next[k] - q[k]) <= 1;
        std::array<double, 4> with = sum;
        for (int k = 0; k < 4; ++k) with[k] += bin(c_end)[k];
        if (!near || quantised_levels(with, (c_end + 1 - c) * col_time) != q) break;
        sum = with;
      }
      const double span = (c_end - c) * col_time;
      double y = g.y(r) + height;
      for (int k = 0; k < 5; ++k) {
        if (q[k] == 0) continue;
        const double h = height * q[k] / kLevels;
        y -= h;
        const std::string fill = k == kIdle ? "url(#idle)" : shade(static_cast<EventKind>(k), 0, 1);
        std::snprintf(buf, sizeof buf,
                      "<rect%s x=\"%.2f\" y=\"%.2f\" width=\"%d\" height=\"%.2f\" fill=\"%s\"><title>%s, "
                      "%s to %s: F %.0f%%, B %.0f%%, W %.0f%%, BW %.0f%%, idle %.0f%%</title></rect>",
                      k == kIdle ? " class=\"idlebin\"" : "", g.left + c * kBinPixels, y, (c_end - c) * kBinPixels, h,
                      fill.c_str(), escape_html(tl.rank_label(r)).c_str(), format_time(c * col_time).c_str(),
                      format_time(c_end * col_time).c_str(), 100 * sum[0] / span, 100 * sum[1] / span,
                      100 * sum[2] / span, 100 * sum[3] / span,
                      100 * std::max(0.0, 1 - (sum[0] + sum[1] + sum[2] + sum[3]) / span));
        out << buf;
      }
      c = c_end;
    }
    out << '\n';
  }
}

void write_legend(std::ostream& out, const Timeline& tl, bool aggregated) {
  out << "<div class=\"legend\">";
  const char* labels[] = {"F forward", "B input gradient", "W weight gradient", "BW full backward"};
  for (int k = 0; k < 4; ++k) {
    out << "<span><i style=\"background:" << shade(static_cast<EventKind>(k), 0, 1) << "\"></i>"
        << labels[k] << "</span>";
  }
  out << (aggregated ? "<span><i class=\"idlebin\"></i>idle</span>" : "<span><i class=\"idle\"></i>idle</span>");
  if (tl.num_segments > 1 && !aggregated) {
    out << "<span><i style=\"background:linear-gradient(90deg," << shade(EventKind::F, 0, tl.num_segments)
        << "," << shade(EventKind::F, tl.num_segments - 1, tl.num_segments)
        << ")\"></i>segment 0 &rarr; " << tl.num_segments - 1 << " (lighter = later)</span>";
  }
  if (tl.max_chunks > 1 && !aggregated) {
    out << "<span><i class=\"chunkkey\"></i>chunk &ge; 1 (dark top band)</span>";
  }
  if (!aggregated) out << "<span><i class=\"sendkey\"></i>send (under the row)</span>";
  if (!aggregated) out << "<span>Box labels: micro-batch.segment; hover for details.</span>";
  out << "</div>\n";
}

}  // namespace

void write_html_timeline(const Timeline& tl, std::ostream& out, const HtmlOptions& options) {
  std::size_t compute = 0;
  for (const Event& e : tl.events) compute += is_compute(e.kind) ? 1 : 0;
  const bool aggregated = compute > options.max_boxes;
  Geometry g;
  g.width = options.plot_width;
  // Room for the longest row label (they name each rank's stages and device).
  std::size_t longest = 0;
  for (int r = 0; r < tl.num_ranks; ++r) longest = std::max(longest, tl.rank_label(r).size());
  g.left = std::max(g.left, 6.2 * static_cast<double>(longest) + 16);
  g.end = std::max(tl.end_time(), 1e-12);
  g.row = std::clamp(900.0 / std::max(tl.num_ranks, 1) - g.gap, 14.0, 24.0);
  const double height = g.y(tl.num_ranks) + 8;
  const double svg_width = g.left + g.width + 70;

  std::vector<double> busy(tl.num_ranks, 0.0);
  for (const Event& e : tl.events) {
    if (is_compute(e.kind) && e.rank >= 0 && e.rank < tl.num_ranks) busy[e.rank] += e.end - e.start;
  }

  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>"
      << escape_html(tl.title) << "</title>\n<style>\n"
         "body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222}\n"
         "h1{font-size:18px;margin:0 0 6px}\n"
         "table.summary{border-collapse:collapse;margin:0 0 8px}\n"
         "table.summary td{padding:1px 14px 1px 0;vertical-align:top}\n"
         "table.summary td:first-child{color:#666;white-space:nowrap}\n"
         ".legend span{margin-right:16px;white-space:nowrap}\n"
         ".legend i{display:inline-block;width:14px;height:12px;margin-right:5px;vertical-align:-2px;"
         "border:1px solid #0003}\n"
         ".legend i.idle{background:#e6e6e6}\n"
         ".legend i.idlebin{background:repeating-linear-gradient(45deg,#f4f4f4 0 2px,#b8b8b8 2px 3px)}\n"
         ".legend i.chunkkey{background:linear-gradient(#222 0 25%,#4c78a8 25%)}\n"
         ".legend i.sendkey{background:linear-gradient(#fff0 0 70%,#333 70%)}\n"
         "svg text{font:11px system-ui,sans-serif}\n"
         "text.axis{text-anchor:middle;fill:#555}\n"
         "text.rank{text-anchor:end;fill:#222}\n"
         "text.busy{fill:#555}\n"
         "text.label{text-anchor:middle;fill:#fff;font-size:10px;pointer-events:none}\n"
         "line.tick{stroke:#0000001a}\n"
         "rect.idle{fill:#e6e6e6}\n"
         "rect.rowbg{fill:#ffffff;stroke:#cfcfcf;stroke-width:0.5}\n"
         "rect.chunk{fill:#222;pointer-events:none}\n"
         "rect.send{fill:#333}\n"
         "rect:hover{stroke:#000;stroke-width:1}\n"
         ".note{color:#666;margin:4px 0}\n"
         "</style></head><body>\n";
  out << "<h1>" << escape_html(tl.title) << "</h1>\n<table class=\"summary\">";
  for (const auto& [key, value] : tl.summary) {
    out << "<tr><td>" << escape_html(key) << "</td><td>" << escape_html(value) << "</td></tr>";
  }
  out << "</table>\n";
  write_legend(out, tl, aggregated);
  if (aggregated) {
    out << "<p class=\"note\">" << compute
        << " compute events: drawn aggregated. In each 4-pixel column of a row, the stack shows "
           "how much of that time the rank spent on F, B, W and BW, and idle (hatched grey), in "
           "eighths of the row; hover for the shares. Open the Chrome trace (Perfetto) for every "
           "event.</p>\n";
  }
  // Scales with the window (viewBox), so the whole step is visible without scrolling.
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"100%\" viewBox=\"0 0 " << svg_width
      << " " << height << "\" preserveAspectRatio=\"xMinYMin meet\">\n";
  if (aggregated) {
    out << "<defs><pattern id=\"idle\" width=\"4\" height=\"4\" patternUnits=\"userSpaceOnUse\" "
           "patternTransform=\"rotate(45)\"><rect width=\"4\" height=\"4\" fill=\"#f4f4f4\"/>"
           "<rect width=\"1.2\" height=\"4\" fill=\"#b8b8b8\"/></pattern></defs>\n";
  }
  write_axis(out, g, tl.num_ranks);
  char buf[256];
  for (int r = 0; r < tl.num_ranks; ++r) {
    // The row's background: idle grey when boxes are drawn exactly (gaps are idle); plain in the
    // aggregated view, which draws idle itself.
    std::snprintf(buf, sizeof buf,
                  "<rect class=\"%s\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"><title>%s: "
                  "idle %s of %s</title></rect>",
                  aggregated ? "rowbg" : "idle", g.left, g.y(r), g.width, g.row - 4, escape_html(tl.rank_label(r)).c_str(),
                  format_time(g.end - busy[r]).c_str(), format_time(g.end).c_str());
    out << buf;
    std::snprintf(buf, sizeof buf, "<text class=\"rank\" x=\"%.2f\" y=\"%.2f\">%s</text>",
                  g.left - 8, g.y(r) + (g.row - 4) / 2 + 4, escape_html(tl.rank_label(r)).c_str());
    out << buf;
    std::snprintf(buf, sizeof buf, "<text class=\"busy\" x=\"%.2f\" y=\"%.2f\">%.0f%% busy</text>\n",
                  g.left + g.width + 6, g.y(r) + (g.row - 4) / 2 + 4, 100 * busy[r] / g.end);
    out << buf;
  }
  if (aggregated) write_aggregated(out, tl, g);
  else write_boxes(out, tl, g);
  out << "</svg>\n</body></html>\n";
}

void write_html_timeline_file(const Timeline& timeline, const std::string& path,
                              const HtmlOptions& options) {
  std::ostringstream out;
  write_html_timeline(timeline, out, options);
  write_file_atomically(path, out.str());  // a unique temporary, renamed: never through a link
}

}  // namespace plait::trace
