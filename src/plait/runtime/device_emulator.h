#pragma once
// Emulated device speed (issue 5.3, the "devices" entries of the parallel section): a rank with
// slow-down factor f pads every compute action to f times its measured duration by sleeping, so
// the padding leaves the CPU to other ranks (as a slower device would leave the host idle)
// instead of spinning. While it sleeps it keeps polling the rank's communication (`poll`), as a
// real device's copy engines progress messages during compute.
#include <functional>

namespace plait::runtime {

class DeviceEmulator {
 public:
  explicit DeviceEmulator(double slowdown) : slowdown_(slowdown) {}
  double slowdown() const { return slowdown_; }
  // Called after a compute action that ran from `start` to `end` (monotonic seconds): returns
  // once start + slowdown * (end - start) has passed, calling `poll` between sleeps of at most
  // 0.5 ms. Returns at once for slowdown 1.
  void pad(double start, double end, const std::function<void()>& poll) const;

 private:
  double slowdown_;
};

}  // namespace plait::runtime
