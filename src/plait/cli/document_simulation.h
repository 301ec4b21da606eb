#pragma once
// plait sim --documents: one schedule timed over steps of packed documents drawn from a named
// length distribution (data/document_distribution.h), in plain order and balanced
// (data.balance "wlb"), against every micro-batch carrying the step's mean work -- the imbalance
// bubble balancing removes (docs/simulator.md, "Packed documents").
#include <string>

#include "plait/data/document_distribution.h"
#include "plait/schedule/schedule_family.h"
#include "plait/sim/simulation.h"

namespace plait::cli {

struct DocumentSimulation {
  data::DocumentDistribution distribution;
  int steps = 16;
  int window_steps = 1;  // the balanced order's window (data.balance_window)
  bool cuts = true;      // with a flops split: each micro-batch's own cut (PipelinePlan::document_cuts)
  int replicas = 1;      // data-parallel replicas of the pipeline, each running m micro-batches of the step
};

// The report's text (a table of orders: max/mean of sum(doc^2) per micro-batch, mean simulated
// step time, its excess over equal work; the longest segment and message of the steps). With
// replicas > 1 a step reads replicas x m micro-batches, each replica's pipeline is timed on its
// own (sim::replica_steps) and the step is the slowest replica's; the table adds max/mean of
// sum(doc^2) per replica.
std::string simulate_documents(const sim::SimulationConfig& config, const schedule::ScheduleFamily& family,
                               const DocumentSimulation& documents);

}  // namespace plait::cli
