#include "plait/runtime/measured_step.h"

#include <algorithm>
#include <numeric>

#include "plait/runtime/rank_gather.h"

namespace plait::runtime {
namespace {

constexpr std::size_t kEventFields = 9;

void encode(const trace::Event& e, std::vector<double>& out) {
  out.insert(out.end(), {static_cast<double>(e.kind), static_cast<double>(e.microbatch),
                         static_cast<double>(e.segment), static_cast<double>(e.chunk), e.start,
                         e.end, static_cast<double>(e.peer), static_cast<double>(e.bytes),
                         e.gradient ? 1.0 : 0.0});
}

trace::Event decode(int rank, const double* f) {
  trace::Event e;
  e.rank = rank;
  e.kind = static_cast<trace::EventKind>(static_cast<int>(f[0]));
  e.microbatch = static_cast<std::int32_t>(f[1]);
  e.segment = static_cast<std::int32_t>(f[2]);
  e.chunk = static_cast<std::int32_t>(f[3]);
  e.start = f[4];
  e.end = f[5];
  e.peer = static_cast<std::int32_t>(f[6]);
  e.bytes = static_cast<std::int64_t>(f[7]);
  e.gradient = f[8] != 0.0;
  return e;
}

}  // namespace

double MeasuredStep::makespan() const {
  return finish.empty() ? 0.0 : *std::max_element(finish.begin(), finish.end());
}

double MeasuredStep::bubble_fraction() const {
  const double span = makespan();
  if (span <= 0) return 0.0;
  const double total = std::accumulate(busy.begin(), busy.end(), 0.0);
  return 1.0 - total / (static_cast<double>(busy.size()) * span);
}

MeasuredStep gather_step(comm::Communicator& world, const DistributedStepResult& mine) {
  std::vector<double> packed = {mine.busy_seconds, mine.pipeline_seconds, mine.step_seconds};
  for (const trace::Event& e : mine.events) encode(e, packed);
  const auto all = gather_all(world, packed);
  MeasuredStep step;
  step.events.resize(all.size());
  for (std::size_t r = 0; r < all.size(); ++r) {
    const std::vector<double>& p = all[r];
    step.busy.push_back(p[0]);
    step.finish.push_back(p[1]);
    step.step_seconds = std::max(step.step_seconds, p[2]);
    for (std::size_t i = 3; i + kEventFields <= p.size(); i += kEventFields) {
      step.events[r].push_back(decode(static_cast<int>(r), p.data() + i));
    }
  }
  return step;
}

trace::Timeline measured_timeline(const PipelinePlan& plan, const MeasuredStep& step,
                                  std::string title,
                                  std::vector<std::pair<std::string, std::string>> summary) {
  trace::Timeline tl;
  tl.title = std::move(title);
  tl.num_ranks = plan.num_ranks();
  tl.num_segments = plan.schedule.layout.num_segments;
  tl.max_chunks = plan.schedule.layout.max_chunks();
  for (int r = 0; r < plan.num_ranks(); ++r) tl.rank_labels.push_back(plan.rank_label(r));
  tl.summary = std::move(summary);
  for (const auto& rank_events : step.events) {
    tl.events.insert(tl.events.end(), rank_events.begin(), rank_events.end());
  }
  return tl;
}

}  // namespace plait::runtime
