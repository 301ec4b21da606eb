#include "plait/trace/html_report.h"

#include <gtest/gtest.h>

#include <sstream>
#include <utility>
#include <vector>

namespace plait::trace {
namespace {

std::string page_of(const Report& r) {
  std::ostringstream out;
  write_html_report(r, out);
  return out.str();
}

// The first polyline's points, (x, y) in pixels.
std::vector<std::pair<double, double>> polyline(const std::string& page) {
  const std::size_t at = page.find("points=\"");
  const std::size_t end = page.find('"', at + 8);
  std::istringstream in(page.substr(at + 8, end - at - 8));
  std::vector<std::pair<double, double>> out;
  double x = 0, y = 0;
  char comma = 0;
  while (in >> x >> comma >> y) out.emplace_back(x, y);
  return out;
}

TEST(HtmlReport, LongSeriesKeepEveryColumnsExtremes) {
  ReportSeries s{"loss", {}, false};
  for (int i = 0; i < 100000; ++i) s.points.emplace_back(i, i == 54321 ? 100.0 : 1.0 + (i % 7) * 0.01);
  Report r;
  r.title = "t";
  r.charts.push_back({"Loss", "step", "nats", {s}, false});
  const std::string page = page_of(r);
  // At most four points per pixel column of a 520-pixel plot, and the one spike still drawn: the
  // highest point (the smallest y, the plot's top at 30 plus the 5% padding) is the spike, all
  // others lie within the bottom 2% of the plot.
  const auto points = polyline(page);
  EXPECT_LE(points.size(), 4u * 520);
  EXPECT_GT(points.size(), 520u);
  int high = 0;
  for (const auto& [x, y] : points) high += y < 40;
  EXPECT_GE(high, 1);
  EXPECT_LE(high, 2);
}

TEST(HtmlReport, EscapesTextAndDrawsEmptyChartsAsNoData) {
  Report r;
  r.title = "a <b> & \"c\"";
  r.summary.emplace_back("k<", "v&");
  r.charts.push_back({"Empty", "x", "y", {}, false});
  r.tables.push_back({"T", {"rank", "text"}, {{"0", "<script>"}}, "", true});
  const std::string page = page_of(r);
  EXPECT_NE(page.find("a &lt;b&gt; &amp; &quot;c&quot;"), std::string::npos);
  EXPECT_NE(page.find("k&lt;"), std::string::npos);
  EXPECT_NE(page.find("no data"), std::string::npos);
  EXPECT_EQ(page.find("<script>"), std::string::npos);
  EXPECT_NE(page.find("<td class=\"prose\">&lt;script&gt;</td>"), std::string::npos);
}

TEST(HtmlReport, LogScaleWhereAskedAndPositive) {
  Report r;
  r.charts.push_back({"Norm", "step", "norm", {{"g", {{0, 0.5}, {1, 20}}, false}}, true});
  const std::string page = page_of(r);
  EXPECT_NE(page.find("norm (log scale)"), std::string::npos);
  r.charts[0].series[0].points.emplace_back(2, -1);  // not positive: linear
  EXPECT_EQ(page_of(r).find("(log scale)"), std::string::npos);
}

}  // namespace
}  // namespace plait::trace
