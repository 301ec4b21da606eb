#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "plait/trace/chrome_trace.h"
#include "plait/trace/html_timeline.h"

namespace plait::trace {
namespace {

Event compute(int rank, EventKind kind, int mb, int seg, int chunk, double start, double end) {
  Event e;
  e.rank = rank;
  e.kind = kind;
  e.microbatch = mb;
  e.segment = seg;
  e.chunk = chunk;
  e.start = start;
  e.end = end;
  return e;
}

Timeline sample() {
  Timeline tl;
  tl.title = "a \"quoted\" <title>";
  tl.num_ranks = 2;
  tl.num_segments = 2;
  tl.max_chunks = 2;
  tl.rank_labels = {"rank 0 (stages 0,3)", ""};
  tl.summary = {{"step time", "4.0 s"}};
  tl.events = {compute(0, EventKind::F, 0, 1, 0, 0.0, 1.0), compute(1, EventKind::B, 3, 0, 1, 1.5, 2.5),
               compute(1, EventKind::W, 3, 0, 1, 2.5, 3.0), compute(0, EventKind::BW, 2, 1, 0, 3.0, 4.0)};
  Event send;
  send.rank = 0;
  send.kind = EventKind::send;
  send.microbatch = 0;
  send.segment = 1;
  send.peer = 1;
  send.bytes = 4096;
  send.start = 1.0;
  send.end = 1.25;
  tl.events.push_back(send);
  return tl;
}

TEST(ChromeTrace, CompleteEventsPerRankAndSendsApart) {
  std::ostringstream out;
  write_chrome_trace(sample(), out);
  const nlohmann::json j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["otherData"]["title"], "a \"quoted\" <title>");
  EXPECT_EQ(j["otherData"]["step time"], "4.0 s");
  std::vector<nlohmann::json> complete;
  int thread_names = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") complete.push_back(e);
    if (e["ph"] == "M" && e["name"] == "thread_name") ++thread_names;
  }
  EXPECT_EQ(thread_names, 4);  // each rank in "compute" and in "sends"
  ASSERT_EQ(complete.size(), 5u);
  EXPECT_EQ(complete[0]["name"], "F0.1c0");
  EXPECT_EQ(complete[0]["tid"], 0);
  EXPECT_DOUBLE_EQ(complete[0]["dur"].get<double>(), 1e6);
  EXPECT_EQ(complete[1]["name"], "B3.0c1");
  EXPECT_EQ(complete[1]["cat"], "B");
  EXPECT_DOUBLE_EQ(complete[1]["ts"].get<double>(), 1.5e6);
  EXPECT_EQ(complete[1]["args"]["chunk"], 1);
  EXPECT_EQ(complete[3]["name"], "BW2.1c0");
  EXPECT_EQ(complete[4]["pid"], 1);
  EXPECT_EQ(complete[4]["args"]["bytes"], 4096);
  EXPECT_EQ(complete[4]["args"]["to"], 1);
}

// The files a run writes for --trace / --html go through a temporary file of a unique name: a
// symbolic link at the path is replaced as an entry, its target never written.
TEST(TraceFiles, ALinkAtTheOutputPathIsReplacedNotWrittenThrough) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("plait_trace_links_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "victim") << "precious";
  for (const char* name : {"t.json", "t.html"}) {
    fs::create_symlink(dir / "victim", dir / name);
    if (std::string(name) == "t.json") write_chrome_trace_file(sample(), (dir / name).string());
    else write_html_timeline_file(sample(), (dir / name).string());
    EXPECT_FALSE(fs::is_symlink(dir / name)) << name;
    EXPECT_GT(fs::file_size(dir / name), 100u) << name;
  }
  std::ifstream in(dir / "victim");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "precious");
  fs::remove_all(dir);
}

TEST(HtmlTimeline, RowsBoxesLegendAndHoverTitles) {
  std::ostringstream out;
  write_html_timeline(sample(), out);
  const std::string html = out.str();
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<title>a &quot;quoted&quot; &lt;title&gt;</title>"), std::string::npos);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  for (const char* legend : {"F forward", "B input gradient", "W weight gradient", "BW full backward",
                             "idle", "segment 0 &rarr; 1", "chunk &ge; 1"}) {
    EXPECT_NE(html.find(legend), std::string::npos) << legend;
  }
  // Each compute event is a box with a hover title; rank rows carry their label and busy share.
  EXPECT_NE(html.find("rank 0 (stages 0,3): F0.1c0 (micro-batch 0, segment 1, chunk 0)"), std::string::npos);
  EXPECT_NE(html.find("rank 1: B3.0c1"), std::string::npos);
  EXPECT_NE(html.find(">50% busy<"), std::string::npos);   // rank 0: 2 s of 4 s
  EXPECT_NE(html.find(">38% busy<"), std::string::npos);   // rank 1: 1.5 s of 4 s
  EXPECT_NE(html.find("class=\"idle\""), std::string::npos);
  EXPECT_NE(html.find("rank 0 sends the activation of 0.1 to rank 1: 4096 bytes"), std::string::npos);
  EXPECT_EQ(html.find("drawn aggregated"), std::string::npos);
}

// Past max_boxes the page aggregates per pixel column: it stays small however many events.
TEST(HtmlTimeline, LargeTimelinesAreAggregated) {
  Timeline tl;
  tl.title = "big";
  tl.num_ranks = 4;
  for (int r = 0; r < 4; ++r) {
    for (int i = 0; i < 50000; ++i) {
      tl.events.push_back(compute(r, i % 2 ? EventKind::BW : EventKind::F, i, 0, 0, i * 1.0 + r, i * 1.0 + r + 0.5));
    }
  }
  std::ostringstream out;
  HtmlOptions options;
  options.plot_width = 800;
  write_html_timeline(tl, out, options);
  const std::string html = out.str();
  EXPECT_NE(html.find("200000 compute events: drawn aggregated"), std::string::npos);
  EXPECT_LT(html.size(), 2u * 1000 * 1000);
  EXPECT_NE(html.find("idle 50%"), std::string::npos);  // each column: half busy
}

// The share of rank `rank`'s row (its background rect, class rowbg) that rects of class `cls`
// cover, from the SVG (rows are told apart by their y range).
double drawn_share(const std::string& html, const std::string& cls, int rank) {
  const auto attr = [&](std::size_t at, const char* name) {
    const std::size_t p = html.find(std::string(" ") + name + "=\"", at);
    return std::stod(html.substr(p + std::string(name).size() + 3));
  };
  std::size_t row = html.find("<rect class=\"rowbg\"");
  for (int r = 0; r < rank; ++r) row = html.find("<rect class=\"rowbg\"", row + 1);
  const double top = attr(row, "y"), height = attr(row, "height"), width = attr(row, "width");
  double area = 0;
  for (std::size_t at = html.find("<rect class=\"" + cls + "\""); at != std::string::npos;
       at = html.find("<rect class=\"" + cls + "\"", at + 1)) {
    const double y = attr(at, "y");
    if (y >= top - 0.01 && y < top + height) area += attr(at, "width") * attr(at, "height");
  }
  return area / (width * height);
}

// The aggregated view draws idle time itself, in a fill distinct from the row's background: a
// rank 68% busy (its time spread evenly over F, B, W and BW) shows about a third of its row idle,
// one 99% busy almost none. (Rounding each kind's share up on its own drew both as full rows.)
TEST(HtmlTimeline, AggregatedRowsShowTheirIdleShare) {
  Timeline tl;
  tl.title = "busy";
  tl.num_ranks = 2;
  const EventKind kinds[] = {EventKind::F, EventKind::B, EventKind::W, EventKind::BW};
  for (int i = 0; i < 4000; ++i) {
    // Rank 0: 4 units of 0.17 in every 1.0; rank 1: 4 units of 0.2475.
    for (int k = 0; k < 4; ++k) {
      tl.events.push_back(compute(0, kinds[k], i, 0, 0, i + 0.25 * k, i + 0.25 * k + 0.17));
      tl.events.push_back(compute(1, kinds[k], i, 0, 0, i + 0.25 * k, i + 0.25 * k + 0.2475));
    }
  }
  HtmlOptions options;
  options.plot_width = 800;
  options.max_boxes = 1000;
  std::ostringstream out;
  write_html_timeline(tl, out, options);
  const std::string html = out.str();
  ASSERT_NE(html.find("drawn aggregated"), std::string::npos);
  EXPECT_NE(html.find(">68% busy<"), std::string::npos);
  EXPECT_NE(html.find(">99% busy<"), std::string::npos);
  const double idle0 = drawn_share(html, "idlebin", 0);
  const double idle1 = drawn_share(html, "idlebin", 1);
  EXPECT_NEAR(idle0, 0.32, 1.0 / 8) << "rank 0";
  EXPECT_LT(idle1, 1.0 / 8) << "rank 1";
  EXPECT_GT(idle0, idle1 + 0.2);
  // Idle has its own fill, not the row's background.
  EXPECT_NE(html.find("<pattern id=\"idle\""), std::string::npos);
  EXPECT_NE(html.find("fill=\"url(#idle)\""), std::string::npos);
  EXPECT_NE(html.find("<rect class=\"rowbg\""), std::string::npos);
  EXPECT_EQ(html.find("<rect class=\"idle\""), std::string::npos);
}

}  // namespace
}  // namespace plait::trace
