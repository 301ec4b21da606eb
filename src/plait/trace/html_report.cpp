#include "plait/trace/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "plait/core/atomic_file.h"
#include "plait/trace/html_text.h"

namespace plait::trace {
namespace {

// Series colours: Tableau 10, as the timeline's.
constexpr const char* kColours[] = {"#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2",
                                    "#eeca3b", "#b279a2", "#ff9da6", "#9d755d", "#bab0ac"};

struct Frame {
  double left = 64, right = 16, top = 30, bottom = 42;
  double width = 600, height = 260;  // of the SVG
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  bool log_y = false;
  double plot_w() const { return width - left - right; }
  double plot_h() const { return height - top - bottom; }
  double x(double v) const { return left + (x1 > x0 ? (v - x0) / (x1 - x0) : 0.5) * plot_w(); }
  double y(double v) const {
    const double t = log_y ? (std::log10(v) - std::log10(y0)) / (std::log10(y1) - std::log10(y0))
                           : (y1 > y0 ? (v - y0) / (y1 - y0) : 0.5);
    return top + (1 - t) * plot_h();
  }
};

std::string number(double v) {
  char buf[32];
  const double a = std::fabs(v);
  if (v == 0) return "0";
  if (a >= 1e3 && a < 1e6 && std::round(v) == v) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else if (a >= 1e5 || a < 1e-3) {
    std::snprintf(buf, sizeof buf, "%.3g", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.4g", v);
  }
  return buf;
}

// The points drawn: all of them, or each pixel column's first, minimum, maximum and last.
std::vector<std::pair<double, double>> thinned(const std::vector<std::pair<double, double>>& p, const Frame& f) {
  const std::size_t columns = static_cast<std::size_t>(f.plot_w());
  if (p.size() <= 2 * columns) return p;
  std::vector<std::pair<double, double>> out;
  std::size_t i = 0;
  while (i < p.size()) {
    const int column = static_cast<int>(f.x(p[i].first));
    std::size_t j = i;
    std::size_t lo = i, hi = i;
    while (j < p.size() && static_cast<int>(f.x(p[j].first)) == column) {
      if (p[j].second < p[lo].second) lo = j;
      if (p[j].second > p[hi].second) hi = j;
      ++j;
    }
    std::vector<std::size_t> keep = {i, lo, hi, j - 1};
    std::sort(keep.begin(), keep.end());
    keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
    for (std::size_t k : keep) out.push_back(p[k]);
    i = j;
  }
  return out;
}

void write_chart(std::ostream& out, const ReportChart& c) {
  Frame f;
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
  for (const ReportSeries& s : c.series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      xmin = std::min(xmin, x);
      xmax = std::max(xmax, x);
      ymin = std::min(ymin, y);
      ymax = std::max(ymax, y);
    }
  }
  out << "<div class=\"chart\"><h2>" << escape_html(c.title) << "</h2>\n";
  if (!(xmin <= xmax)) {
    out << "<p class=\"note\">no data</p></div>\n";
    return;
  }
  f.log_y = c.log_y && ymin > 0;
  f.x0 = xmin;
  f.x1 = xmax;
  if (f.log_y) {
    f.y0 = std::pow(10.0, std::floor(std::log10(ymin)));
    f.y1 = std::pow(10.0, std::ceil(std::log10(ymax)));
    if (f.y1 <= f.y0) f.y1 = f.y0 * 10;
  } else {
    const double pad = ymax > ymin ? 0.05 * (ymax - ymin) : std::max(std::fabs(ymax) * 0.05, 1e-12);
    f.y0 = ymin - pad;
    f.y1 = ymax + pad;
    if (ymin >= 0 && f.y0 < 0) f.y0 = 0;
  }
  char buf[512];
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << f.width << "\" height=\"" << f.height
      << "\" viewBox=\"0 0 " << f.width << " " << f.height << "\">\n";
  std::snprintf(buf, sizeof buf, "<rect class=\"plot\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n", f.left,
                f.top, f.plot_w(), f.plot_h());
  out << buf;
  // y ticks
  std::vector<double> yticks;
  if (f.log_y) {
    for (double v = f.y0; v <= f.y1 * 1.0001; v *= 10) yticks.push_back(v);
  } else {
    const double step = nice_tick_step(f.y1 - f.y0, 5);
    for (double v = std::ceil(f.y0 / step) * step; v <= f.y1 + 1e-9 * step; v += step) yticks.push_back(v);
  }
  for (double v : yticks) {
    std::snprintf(buf, sizeof buf,
                  "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>"
                  "<text class=\"ytick\" x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                  f.left, f.left + f.plot_w(), f.y(v), f.y(v), f.left - 6, f.y(v) + 4, number(v).c_str());
    out << buf;
  }
  // x ticks
  const double xstep = nice_tick_step(std::max(f.x1 - f.x0, 1e-12), 6);
  for (double v = std::ceil(f.x0 / xstep) * xstep; v <= f.x1 + 1e-9 * xstep; v += xstep) {
    std::snprintf(buf, sizeof buf,
                  "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>"
                  "<text class=\"xtick\" x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                  f.x(v), f.x(v), f.top, f.top + f.plot_h(), f.x(v), f.top + f.plot_h() + 15, number(v).c_str());
    out << buf;
  }
  std::snprintf(buf, sizeof buf, "<text class=\"xlabel\" x=\"%.1f\" y=\"%.1f\">%s</text>\n", f.left + f.plot_w() / 2,
                f.height - 6, escape_html(c.x_label).c_str());
  out << buf;
  std::snprintf(buf, sizeof buf, "<text class=\"ylabel\" transform=\"translate(14 %.1f) rotate(-90)\">%s</text>\n",
                f.top + f.plot_h() / 2, escape_html(c.y_label + (f.log_y ? " (log scale)" : "")).c_str());
  out << buf;
  // series, with a legend along the top
  double legend_x = f.left;
  for (std::size_t k = 0; k < c.series.size(); ++k) {
    const ReportSeries& s = c.series[k];
    const char* colour = kColours[k % std::size(kColours)];
    std::ostringstream path;
    for (const auto& [x, y] : thinned(s.points, f)) {
      if (!std::isfinite(x) || !std::isfinite(y) || (f.log_y && y <= 0)) continue;
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", f.x(x), f.y(y));
      path << buf;
    }
    out << "<polyline class=\"series\" stroke=\"" << colour << "\" points=\"" << path.str() << "\"><title>"
        << escape_html(s.name) << "</title></polyline>\n";
    if (s.dots) {
      for (const auto& [x, y] : s.points) {
        if (!std::isfinite(x) || !std::isfinite(y) || (f.log_y && y <= 0)) continue;
        std::snprintf(buf, sizeof buf, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>%s at %s: %s</title></circle>\n",
                      f.x(x), f.y(y), colour, escape_html(s.name).c_str(), number(x).c_str(), number(y).c_str());
        out << buf;
      }
    }
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%.1f\" y=\"10\" width=\"12\" height=\"4\" fill=\"%s\"/>"
                  "<text class=\"legend\" x=\"%.1f\" y=\"16\">%s</text>\n",
                  legend_x, colour, legend_x + 16, escape_html(s.name).c_str());
    out << buf;
    legend_x += 28 + 6.5 * static_cast<double>(s.name.size());
  }
  out << "</svg></div>\n";
}

void write_table(std::ostream& out, const ReportTable& t) {
  out << "<h2>" << escape_html(t.title) << "</h2>\n<table class=\"data\"><tr>";
  for (const std::string& h : t.header) out << "<th>" << escape_html(h) << "</th>";
  out << "</tr>\n";
  for (const auto& row : t.rows) {
    out << "<tr>";
    for (std::size_t i = 0; i < row.size(); ++i) {
      const char* cls = i == 0 ? "" : t.prose && i + 1 == row.size() ? " class=\"prose\"" : " class=\"num\"";
      out << "<td" << cls << ">" << escape_html(row[i]) << "</td>";
    }
    out << "</tr>\n";
  }
  out << "</table>\n";
  if (!t.note.empty()) out << "<p class=\"note\">" << escape_html(t.note) << "</p>\n";
}

}  // namespace

void write_html_report(const Report& r, std::ostream& out) {
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << escape_html(r.title)
      << "</title>\n<style>\n"
         "body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222}\n"
         "h1{font-size:18px;margin:0 0 6px}\n"
         "h2{font-size:14px;margin:12px 0 4px}\n"
         "table.summary{border-collapse:collapse;margin:0 0 8px}\n"
         "table.summary td{padding:1px 14px 1px 0;vertical-align:top}\n"
         "table.summary td:first-child{color:#666;white-space:nowrap}\n"
         ".charts{display:flex;flex-wrap:wrap;gap:8px 20px}\n"
         ".chart h2{margin:4px 0 0}\n"
         "svg text{font:11px system-ui,sans-serif;fill:#444}\n"
         "rect.plot{fill:#fff;stroke:#bbb}\n"
         "line.grid{stroke:#0000001a}\n"
         "text.ytick{text-anchor:end}\n"
         "text.xtick,text.xlabel,text.ylabel{text-anchor:middle}\n"
         "polyline.series{fill:none;stroke-width:1.4}\n"
         "table.data{border-collapse:collapse}\n"
         "table.data th,table.data td{border:1px solid #ddd;padding:2px 8px}\n"
         "table.data th{background:#f4f4f4}\n"
         "td.num{text-align:right;font-variant-numeric:tabular-nums}\n"
         "td.prose{white-space:pre-wrap;font-family:ui-monospace,monospace}\n"
         ".note{color:#666;margin:4px 0}\n"
         "</style></head><body>\n";
  out << "<h1>" << escape_html(r.title) << "</h1>\n<table class=\"summary\">";
  for (const auto& [key, value] : r.summary) {
    out << "<tr><td>" << escape_html(key) << "</td><td>" << escape_html(value) << "</td></tr>";
  }
  out << "</table>\n<div class=\"charts\">\n";
  for (const ReportChart& c : r.charts) write_chart(out, c);
  out << "</div>\n";
  for (const ReportTable& t : r.tables) write_table(out, t);
  out << "</body></html>\n";
}

void write_html_report_file(const Report& report, const std::string& path) {
  std::ostringstream out;
  write_html_report(report, out);
  write_file_atomically(path, out.str());
}

}  // namespace plait::trace
