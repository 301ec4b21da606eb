#pragma once
// A self-contained HTML page of charts and tables (no script, no external resource: inline SVG
// and CSS, like html_timeline.h), for `plait report`: line charts of series over a shared x
// (training loss and validation loss over steps, ...) and tables (memory by rank). Each chart
// scales its y axis to its data (a log scale where asked and the data are positive), draws
// series as polylines (series of few points as dots as well), and carries a legend and hover
// titles with the values. Series of more points than the chart has pixels are drawn as each
// pixel column's minimum and maximum, so spikes stay visible and the page stays small.
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace plait::trace {

struct ReportSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), x increasing
  bool dots = false;                               // mark every point (sparse series)
};

struct ReportChart {
  std::string title, x_label, y_label;
  std::vector<ReportSeries> series;
  bool log_y = false;
};

struct ReportTable {
  std::string title;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string note;  // under the table
  bool prose = false;  // the last column is text (left-aligned, its line breaks kept), not numbers
};

struct Report {
  std::string title;
  std::vector<std::pair<std::string, std::string>> summary;
  std::vector<ReportChart> charts;
  std::vector<ReportTable> tables;
};

void write_html_report(const Report& report, std::ostream& out);
// Written atomically (a unique temporary renamed into place); plait::Error if it cannot be.
void write_html_report_file(const Report& report, const std::string& path);

}  // namespace plait::trace
