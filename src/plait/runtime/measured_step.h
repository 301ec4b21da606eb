#pragma once
// One training step as measured on every rank, gathered for reports: per-rank compute events,
// busy time and finish time; the measured bubble fraction; and the step as a trace::Timeline,
// the same value the simulator produces (sim::make_timeline), so `plait train --trace/--html`
// and `plait sim --trace/--html` write the same formats and can be laid side by side.
#include <string>
#include <utility>
#include <vector>

#include "plait/comm/communicator.h"
#include "plait/runtime/distributed_trainer.h"
#include "plait/runtime/pipeline_plan.h"
#include "plait/trace/event.h"

namespace plait::runtime {

struct MeasuredStep {
  std::vector<std::vector<trace::Event>> events;  // per rank, times from the step start
  std::vector<double> busy;                        // per rank, seconds of compute
  std::vector<double> finish;                      // per rank, end of its last compute action
  double step_seconds = 0;                         // slowest rank, barrier to optimizer end

  // The pipeline's makespan: the last compute action's end over all ranks.
  double makespan() const;
  // 1 - sum(busy) / (ranks x makespan): the idle share of the ranks over the pipeline (the
  // simulator's bubble fraction, sim/event_simulator.h).
  double bubble_fraction() const;
};

// Collective over `world`: every rank passes its own step result and gets every rank's.
MeasuredStep gather_step(comm::Communicator& world, const DistributedStepResult& mine);

// The step as a timeline (one row per rank, labelled with its stages and emulated device);
// `summary` lines are shown above it.
trace::Timeline measured_timeline(const PipelinePlan& plan, const MeasuredStep& step,
                                  std::string title,
                                  std::vector<std::pair<std::string, std::string>> summary);

}  // namespace plait::runtime
