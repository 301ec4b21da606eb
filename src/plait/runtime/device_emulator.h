#pragma once
// Emulated device speed (issue 5.3, the "devices" entries of the parallel section): a rank with
// slow-down factor f pads every compute action to f times its duration alone on a core by
// sleeping, so the padding leaves the CPU to other ranks (as a slower device would leave the host
// idle) instead of spinning. While it sleeps it keeps polling the rank's communication (`poll`),
// as a real device's copy engines progress messages during compute.
//
// "Alone on a core": with one compute thread per rank, the action's duration is the thread's CPU
// time, not its wall time. Emulated ranks outnumber the cores they share (four on two here), and
// when several compute at once (data-parallel ranks in lockstep) each waits for a core; padding
// the wall time would multiply that wait by f, so the emulated device would run slower than
// declared exactly when its neighbours are busy. With several compute threads the CPU time of
// the calling thread is not the action's, and the wall time is used.
//
// A tensor-parallel action also runs its TP group's collectives (model/tensor_parallel.h); their
// time alone (`link_seconds`, counted by the group the same way) goes over the machine's link,
// not the device, and is not stretched: the action is padded to f x (its time alone - link) +
// link, the simulator's charge of a TP unit (its compute on the device plus the collectives on
// the link: spec/tensor_parallel_plan.h). Stretching it too made the TP group's link f times
// slower than the one the bench measures. The CPU time a collective spends pausing between polls
// while it waits for a partner (CommTensorParallelGroup::paused_seconds) is neither: the caller
// leaves it out of `cpu_seconds`, and the group out of `link_seconds`.
#include <functional>

namespace plait::runtime {

class DeviceEmulator {
 public:
  // `single_threaded`: compute runs on the calling thread only (the CPU-time rule above).
  DeviceEmulator(double slowdown, bool single_threaded)
      : slowdown_(slowdown), single_threaded_(single_threaded) {}
  double slowdown() const { return slowdown_; }
  // An emulated straggler (FailureInjection::kSlow): the device's speed changes mid-run.
  void set_slowdown(double slowdown) { slowdown_ = slowdown; }
  // Called after a compute action that ran from `start` to `end` (monotonic seconds) using
  // `cpu_seconds` of the calling thread's CPU time, `link_seconds` of it alone in TP collectives:
  // returns once start + slowdown * (d - link) + link has passed, d the action's duration alone
  // (the CPU time when single-threaded and below the wall time, else end - start), calling `poll`
  // between sleeps of at most 0.5 ms. Returns at once for slowdown 1.
  void pad(double start, double end, double cpu_seconds, const std::function<void()>& poll,
           double link_seconds = 0) const;
  // When pad returns: start + slowdown * (d - link) + link, with d as above.
  double padded_end(double start, double end, double cpu_seconds, double link_seconds = 0) const;

 private:
  double slowdown_;
  bool single_threaded_;
};

}  // namespace plait::runtime
